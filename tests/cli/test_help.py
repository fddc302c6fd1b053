"""``--help`` that teaches, ``--version``, and usage errors as one line with a hint (exit 2)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trainprobe
from trainprobe.cli import COMMANDS

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


def test_top_help_lists_every_command_with_its_summary(cli: Any) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("usage: trainprobe [--debug] COMMAND")
    said = " ".join(result.stdout.split())
    for name, summary in COMMANDS.items():
        assert f"{name} {summary}" in said
    assert "Exit codes: 0 healthy, 1 findings or a failed run, 2 usage error" in said
    assert cli("-h").stdout == result.stdout


def test_version_is_the_package_version(cli: Any) -> None:
    assert cli("--version") == (0, f"trainprobe {trainprobe.__version__}\n", "")


def test_without_a_command_the_help_goes_to_stderr_and_exits_2(cli: Any) -> None:
    result = cli()
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: trainprobe [--debug] COMMAND")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_help_teaches(name: str, cli: Any) -> None:
    result = cli(name, "--help")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"usage: trainprobe {name} ")
    assert COMMANDS[name] in " ".join(out.split())
    assert "Exit codes" in out
    assert re.search(r"^  -h, --help +Show this help and exit\.$", out, re.M)
    if name not in ("demo", "mcp"):  # neither takes an argument
        assert "\narguments:\n" in out
    if name != "demo":
        assert "\nexamples:\n  trainprobe " + name in out
    assert cli(name, "-h").stdout == out


def test_options_are_grouped_and_defaults_shown(cli: Any) -> None:
    out = cli("scan", "--help").stdout
    sections = re.findall(r"^(\S[^:\n]*):$", out, re.M)
    assert sections == ["arguments", "options", "where the files are (--on)", "output", "examples"]
    text = " ".join(out.split())
    assert (
        "--timeout SECONDS Seconds before the remote scan is killed; per target in a fleet (default: 3600)"
        in text
    )
    assert "--connect-timeout SECONDS" in out


def test_help_paragraphs_fill_the_width_and_examples_keep_theirs(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "62")
    out = cli("run", "--help").stdout
    paragraphs = [p for p in out.split("\n\n") if not re.search("^ ", p, re.M)]  # not a verbatim block
    assert len(paragraphs) >= 4
    assert max(len(line) for p in paragraphs for line in p.splitlines()) <= 60
    assert "  trainprobe run 'ssh=node[01-16]//docker=trainer' check_ckpt.py --timeout 600 -- /ckpts" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["scna"],
            "error: no such command: scna — did you mean 'trainprobe scan'? (see 'trainprobe --help')",
        ),
        (["frobnicate"], "error: no such command: frobnicate — the commands are triage, scan, check"),
        (["--verbose"], "error: no such option: --verbose"),
        (["scan", "a.pt", "--bogus"], "error: scan: no such option: --bogus — see 'trainprobe scan --help'"),
        (["scan", "a.pt", "--js"], "error: scan: no such option: --js"),  # no abbreviations
        (["diff", "a.pt"], "error: diff: the following arguments are required: B"),
        (["diff", "a.pt", "b.pt", "c.pt"], "error: diff: unexpected argument: c.pt"),
        (["logs", "x.log", "--fail-on", "sometimes"], "error: logs: --fail-on: invalid choice: 'sometimes'"),
        (["scan", "a.pt", "--timeout"], "error: scan: --timeout: expected one argument"),
        (["probe", "local", "--parallel", "many"], "error: probe: --parallel: 'many' is not a whole number"),
    ],
)
def test_usage_errors_are_one_line_with_a_hint_and_exit_2(args: list[str], message: str, cli: Any) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(message)


def test_a_command_without_its_arguments_shows_its_help_on_stderr(cli: Any) -> None:
    result = cli("run")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: trainprobe run TARGET SCRIPT")


def test_the_real_program_and_python_m_agree() -> None:
    for argv in ([TRAINPROBE], [sys.executable, "-m", "trainprobe"]):
        proc = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            0,
            f"trainprobe {trainprobe.__version__}\n",
            "",
        )
        proc = subprocess.run([*argv, "scan", "a.pt", "--bogus"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        assert proc.stderr == "error: scan: no such option: --bogus — see 'trainprobe scan --help'\n"


@pytest.mark.parametrize("name", ["scan", "check", "diff", "logs", "watch"])
def test_every_command_that_reads_files_teaches_on(name: str, cli: Any) -> None:
    out = cli(name, "--help").stdout
    assert re.search(r"^  --on TARGET ", out, re.M), out
    examples = out.split("\nexamples:\n", 1)[1]
    assert re.search(rf"^  trainprobe {name} .*--on ssh=", examples, re.M), examples
    assert "trainprobe run --help" in " ".join(out.split())  # where the target syntax is taught
