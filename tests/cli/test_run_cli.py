"""``trainprobe run`` on one target: the fast path (no typer, no rich) and the Typer command agree exactly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))
#: the Typer command alone, as `trainprobe` runs it for anything the fast path declines
TYPER = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'trainprobe'; from trainprobe.cli import load_app; load_app()()",
]

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


def normalised(proc: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    def clean(text: str) -> str:
        text = re.sub(r"/runs/[^\s\"/]+", "/runs/RUN", text)
        return re.sub(r'"duration": [0-9.]+', '"duration": D', text)

    return proc.returncode, clean(proc.stdout), clean(proc.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["local", "{script}", "--", "a", "--b", "$c"],
        ["here", "{script}", "--json", "--", "x"],
        ["--on", "local", "{script}", "-q", "--", "exit"],
        ["--on=local", "{script}", "--timeout", "60", "--", "raise"],
        ["local", "{script}", "--need", "json,os", "--connect-timeout=5", "--json"],
        ["local//python=/nonexistent/python3", "{script}"],
    ],
)
def test_fast_path_and_typer_command_print_and_exit_the_same(script: Path, args: list[str]) -> None:
    argv = ["run", *(a.replace("{script}", str(script)) for a in args)]
    fast = subprocess.run([TRAINPROBE, *argv], capture_output=True, text=True, timeout=60)
    typer = subprocess.run([*TYPER, *argv], capture_output=True, text=True, timeout=60)
    assert normalised(fast) == normalised(typer)
    assert fast.stderr.count("error:") <= 1


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


def test_the_fast_path_loads_neither_typer_nor_rich(script: Path) -> None:
    code = (
        "import sys; from trainprobe.cli import fast_run; "
        f"rc = fast_run(['local', {str(script)!r}, '-q']); "
        "print(rc, 'typer' in sys.modules, 'rich' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout == "0 False False\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "Run a local Python script on TARGET"),
        (["local", "--bogus", "x.py"], "No such option: --bogus"),
        (["local", "{script}", "--timeout", "soon"], "Invalid value for '--timeout'"),
        (["local", "missing.py"], "script missing.py is not a readable file"),
        (["nosuch", "{script}"], "'nosuch' is neither a target string nor a name"),
        (["local"], "missing SCRIPT"),
        (
            ["local", "--on", "local", "{script}"],
            "local looks like a target, but with --on every target is given",
        ),
    ],
)
def test_what_the_fast_path_declines_the_typer_command_explains(
    script: Path, args: list[str], expected: str
) -> None:
    argv = [a.replace("{script}", str(script)) for a in args]
    proc = subprocess.run([TRAINPROBE, "run", *argv], capture_output=True, text=True, timeout=60)
    assert expected in " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == (0 if args == ["--help"] else 2)
