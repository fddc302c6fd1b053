"""``trainprobe run`` on one target, as the real program: output, JSON, exit codes, usage errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))

SCRIPT = """\
import sys
print("out", sys.argv[1:], "{braces} $HOME")
print("err", file=sys.stderr)
if sys.argv[1:] == ["raise"]:
    raise ValueError("boom")
if sys.argv[1:] == ["exit"]:
    sys.exit(3)

def main():
    return {"args": sys.argv[1:]}
"""


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("TRAINPROBE_CONFIG", str(tmp_path / "targets.toml"))
    (tmp_path / "targets.toml").write_text('[targets]\nhere = "local"\n')
    path = tmp_path / "hello.py"
    path.write_text(SCRIPT)
    return path


def trainprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRAINPROBE, *args], capture_output=True, text=True, timeout=60)


LOG_LINE = re.compile(r"log: \S+/runs/[^\s/]+\n")


@pytest.mark.parametrize(
    ("args", "code", "stdout", "stderr"),
    [
        (
            ["local", "{script}", "--", "a", "--b", "$c"],
            0,
            "out ['a', '--b', '$c'] {braces} $HOME\n",
            "err\n",
        ),
        (["--on", "local", "{script}", "-q", "--", "exit"], 3, "", ""),
        (
            ["--on=local", "{script}", "--timeout", "60", "--", "raise"],
            1,
            "out ['raise'] {braces} $HOME\n",
            None,
        ),
        (["local//python=/nonexistent/python3", "{script}"], 127, "", None),
    ],
)
def test_options_anywhere_and_what_each_run_prints(
    script: Path, args: list[str], code: int, stdout: str, stderr: str | None
) -> None:
    proc = trainprobe("run", *(a.replace("{script}", str(script)) for a in args))
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == stdout
    if stderr is not None:
        assert LOG_LINE.sub("", proc.stderr) == stderr
    assert proc.stderr.count("error:") == (1 if code in (1, 127) else 0)


@pytest.mark.parametrize(
    "args",
    [
        ["here", "{script}", "--json", "--", "x"],
        ["local", "{script}", "--need", "json,os", "--connect-timeout=5", "--json"],
    ],
)
def test_json_is_one_document_and_live_output_goes_to_stderr(script: Path, args: list[str]) -> None:
    proc = trainprobe("run", *(a.replace("{script}", str(script)) for a in args))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["exit_code"] == 0
    assert data["result"] == {"args": args[args.index("--") + 1 :] if "--" in args else []}
    assert proc.stderr.startswith("out ")


def test_single_run_output_json_and_exit_codes(script: Path) -> None:
    proc = subprocess.run(
        [TRAINPROBE, "run", "local", str(script), "--", "a b"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert proc.stdout == "out ['a b'] {braces} $HOME\n"
    assert proc.stderr.startswith("err\nlog: ")
    data = json.loads(
        subprocess.run(
            [TRAINPROBE, "run", "local", str(script), "--json"], capture_output=True, text=True
        ).stdout
    )
    assert data["result"] == {"args": []}
    assert Path(data["stdout_log"]).read_text() == "out [] {braces} $HOME\n"
    failed = subprocess.run(
        [TRAINPROBE, "run", "local", str(script), "--", "raise"], capture_output=True, text=True
    )
    assert failed.returncode == 1
    assert "error: local: ValueError: boom" in failed.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "Run a local Python script on TARGET"),
        (["local", "--bogus", "x.py"], "error: run: no such option: --bogus — see 'trainprobe run --help'"),
        (["local", "{script}", "--timeout", "soon"], "error: run: --timeout: 'soon' is not a number"),
        (["local", "{script}", "--timeout", "nan"], "--timeout: 'nan' is not a finite number"),
        (["local", "{script}", "--timeout", "-1"], "--timeout: '-1' is not a positive number of seconds"),
        (["local", "{script}", "--connect-timeout", "0"], "--connect-timeout: '0' is not a positive number"),
        (["local", "{script}", "--parallel", "0"], "--parallel: '0' is less than 1"),
        (["local", "missing.py"], "error: script missing.py is not a readable file"),
        (["nosuch", "{script}"], "'nosuch' is neither a target string nor a name"),
        (["local"], "missing SCRIPT"),
        (
            ["local", "--on", "local", "{script}"],
            "local looks like a target, but with --on every target is given",
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(script: Path, args: list[str], expected: str) -> None:
    proc = trainprobe("run", *(a.replace("{script}", str(script)) for a in args))
    assert expected in " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == (0 if args == ["--help"] else 2)
    if args != ["--help"]:
        assert proc.stdout == ""
        assert len(proc.stderr.splitlines()) == 1, proc.stderr


def test_without_arguments_the_help_is_shown_and_exit_2() -> None:
    proc = trainprobe("run")
    assert proc.returncode == 2
    assert "usage: trainprobe run TARGET SCRIPT" in proc.stderr
    assert "Exit codes, one target" in proc.stderr
