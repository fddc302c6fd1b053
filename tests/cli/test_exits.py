"""How the real program ends when its output goes away or it is interrupted: an exit code and at most one
line, never a traceback. stdout closed by ``| head`` → 141 and nothing on stderr; stdout on a full disk →
``error: cannot write to stdout: ...`` and 2; Ctrl-C → 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from waiting import EVENT_DEADLINE_S

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))

SCRIPT = """\
import sys, time
for i in range(2000):
    print("line", i, "of a long output")
    if sys.argv[1:] == ["slow"]:
        sys.stdout.flush()
        time.sleep(0.05)  # paces its own output (a slow run to interrupt): the test waits for lines

def main():
    return {"done": True}
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("exits")
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    (root / "small.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + b"\x00\x00\x80\x3f\x00\x00\xc0\x7f"
    )
    (root / "train.jsonl").write_text(
        "".join(f'{{"step": {s}, "loss": {6.0 if s == 130 else 1.0}}}\n' for s in range(200))
    )
    (root / "out.py").write_text(SCRIPT)
    return root


def env(root: Path) -> dict[str, str]:
    return {**os.environ, "TRAINPROBE_RUNS_DIR": str(root / "runs"), "XDG_CONFIG_HOME": str(root / "cfg")}


COMMAND_LINES = [
    ["--version"],
    ["--help"],
    ["scan", "--help"],
    ["scan", "small.safetensors"],
    ["scan", "--json", "small.safetensors"],
    ["check", "--json", "small.safetensors"],
    ["logs", "train.jsonl"],
    ["logs", "train.jsonl", "--json"],
    ["run", "local", "out.py"],
    ["run", "local", "out.py", "--json", "-q"],
    ["run", "--on", "local", "--on", "local//cd=/", "out.py"],
]


@pytest.mark.parametrize("args", COMMAND_LINES, ids=" ".join)
def test_stdout_closed_by_head_exits_141_silently(files: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited: every write fails with EPIPE
    try:
        proc = subprocess.run(
            [TRAINPROBE, *args], stdout=write_end, stderr=subprocess.PIPE, cwd=files, env=env(files),
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr
    assert "error" not in stderr


def test_a_closed_pipe_stops_a_long_run(files: Path) -> None:
    """`trainprobe run ... | head -3`: the run ends when head does, it does not run to its end."""
    proc = subprocess.Popen(
        [TRAINPROBE, "run", "local", "out.py", "--", "slow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=files,
        env=env(files),
    )
    assert proc.stdout is not None
    for _ in range(3):
        proc.stdout.readline()
    proc.stdout.close()  # head -3 exits
    _, err = proc.communicate(timeout=EVENT_DEADLINE_S)  # the whole output would take 100 s: rc tells
    assert proc.returncode == 141, err
    assert b"Traceback" not in err


@pytest.mark.parametrize("args", [a for a in COMMAND_LINES if "-q" not in a], ids=" ".join)
def test_stdout_on_a_full_disk_is_one_error_line_and_exit_2(files: Path, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [TRAINPROBE, *args], stdout=full, stderr=subprocess.PIPE, text=True, cwd=files, env=env(files),
            timeout=120,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("✓ ")]  # a fleet's progress
    assert lines[-1] == "error: cannot write to stdout: No space left on device"
    assert "Traceback" not in proc.stderr
    assert [line for line in lines if line.startswith("error")] == lines[-1:]


def _sigint_as_a_terminal_gives_it() -> None:
    """In the child before exec: SIGINT at its default, as a terminal's foreground job has it. A child
    inherits an ignored SIGINT, and Python started so never raises KeyboardInterrupt: in the full suite the
    test process's SIGINT was ignored by then (it passed alone and failed there, on a quiet machine too)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_run_exits_130_with_one_line(files: Path) -> None:
    proc = subprocess.Popen(
        [TRAINPROBE, "run", "local", "out.py", "--", "slow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=files,
        env=env(files),
        preexec_fn=_sigint_as_a_terminal_gives_it,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=EVENT_DEADLINE_S)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (error,) = [line for line in err.splitlines() if "error" in line]
    assert error.startswith("error: ")
    assert "interrupted" in error


def test_ctrl_c_anywhere_in_a_command_is_error_interrupted_and_130(
    files: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    import trainprobe.metrics

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(trainprobe.metrics, "analyze", interrupted)  # Ctrl-C while the log is read
    result = cli("logs", str(files / "train.jsonl"))
    assert result.exit_code == 130
    assert result.stderr == "error: interrupted\n"


@pytest.mark.parametrize(
    "args",
    [
        ["run", "local", "out.py", "--timeout", "nan"],
        ["run", "local", "out.py", "--timeout", "-1"],
        ["run", "local", "out.py", "--timeout", "inf"],
        ["run", "local", "out.py", "--connect-timeout", "0"],
        ["probe", "local", "--timeout", "nan"],
        ["probe", "local", "--connect-timeout", "-5"],
        ["scan", "x.pt", "--on", "local", "--timeout", "nan"],
        ["scan", "x.pt", "--on", "local", "--connect-timeout", "0"],
        ["check", "x.pt", "--on", "local", "--timeout", "-1"],
        ["triage", "run", "--on", "local", "--timeout", "0"],
        ["triage", "run", "--connect-timeout", "nan"],
        ["watch", "train.log", "--interval", "nan"],
        ["logs", "train.log", "--stall-floor", "-1"],
        ["scan", "x.pt", "--workers", "0"],
        ["diff", "a.pt", "b.pt", "--limit", "zero"],
    ],
    ids=" ".join,
)
def test_bad_timeouts_and_counts_are_usage_errors(args: list[str], cli: Any) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {args[0]}: --")
    assert line.endswith(f"— see 'trainprobe {args[0]} --help'")


@pytest.mark.parametrize("option", ["--html", "--png"])
def test_a_report_file_that_cannot_be_written_is_one_line_and_exit_2(
    files: Path, tmp_path: Path, option: str, cli: Any
) -> None:
    target = tmp_path / "no-such-dir" / "report"
    result = cli("logs", str(files / "train.jsonl"), option, str(target), "-q")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")
    assert str(target) in line
    assert "No such file or directory" in line


def test_the_program_skips_the_teardown_but_not_a_wrappers_finally(files: Path) -> None:
    """main() as the program ends the process from an exit handler: after the code around it has run."""
    wrapper = (
        "import sys\n"
        "from trainprobe.cli import main\n"
        "sys.argv[1:] = ['scan', 'small.safetensors']\n"
        "try:\n"
        "    sys.exit(main())\n"
        "finally:\n"
        "    print('the wrapper finished', file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper],
        capture_output=True,
        text=True,
        cwd=files,
        env=env(files),
        timeout=120,
    )
    assert proc.returncode == 1  # NaN found: the command's code, not 0
    assert "✗ NON-FINITE" in proc.stdout
    assert proc.stderr == "the wrapper finished\n"
