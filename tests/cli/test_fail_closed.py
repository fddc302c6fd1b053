"""A command that crashed never exits 0: every exception trainprobe did not expect becomes one line naming it
and where its traceback was kept, and exit 3 — through the real program (its exit path skips the interpreter's
teardown, the place a crash used to turn into 0) and in-process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainprobe.cli import COMMANDS, main

#: what each command is given: enough to get past argument parsing into its own code
ARGS = {
    "triage": ["RUN"],
    "scan": ["F"],
    "check": ["F"],
    "diff": ["F", "F"],
    "logs": ["F"],
    "watch": ["F"],
    "run": ["local", "S"],
    "probe": ["local"],
    "mcp": [],
    "demo": [],
}

#: the exceptions injected into each command's body: a bug, the memory and recursion limits, a Unicode
#: error (a surrogate in a name), a library's sys.exit(0)
CRASHES = {
    "RuntimeError": "RuntimeError('injected')",
    "MemoryError": "MemoryError()",
    "RecursionError": "RecursionError('maximum recursion depth exceeded')",
    "UnicodeEncodeError": "UnicodeEncodeError('utf-8', 'w\\udcff', 1, 2, 'surrogates not allowed')",
    "SystemExit0": "SystemExit(0)",
}

#: runs the real entry point (``main()`` without argv: the program's own exit path) with the command's body
#: replaced by one that raises
PROGRAM = """
import importlib, sys
name, crash = sys.argv[1], sys.argv[2]
module = importlib.import_module("trainprobe.cli." + name)
def run(**options):
    raise eval(crash)
module.COMMAND = module.COMMAND._replace(run=run)
sys.argv = ["trainprobe", *sys.argv[3:]]
from trainprobe.cli import main
main()
"""


def test_every_command_is_covered() -> None:
    assert set(ARGS) == set(COMMANDS)


@pytest.mark.parametrize("crash", CRASHES)
@pytest.mark.parametrize("name", COMMANDS)
def test_a_crash_in_any_command_exits_3_with_one_line(name: str, crash: str, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    env.pop("TRAINPROBE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, name, CRASHES[crash], name, *ARGS[name]],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 3, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: internal error:"), lines[0]
    if crash != "SystemExit0":
        kept = list((tmp_path / "trainprobe" / "crashes").iterdir())
        assert len(kept) == 1
        assert str(kept[0]) in lines[0]
        assert "Traceback (most recent call last)" in kept[0].read_text()


def test_debug_shows_the_traceback_and_still_fails(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "scan", "RuntimeError('injected')", "--debug", "scan", "F"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 3
    assert "Traceback (most recent call last)" in done.stderr
    assert "RuntimeError: injected" in done.stderr


def test_a_worker_thread_that_crashes_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import threading

    import trainprobe.cli.probe as probe

    def run(**options: object) -> int:
        worker = threading.Thread(target=lambda: 1 / 0)
        worker.start()
        worker.join()
        return 0

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("TRAINPROBE_DEBUG", raising=False)
    monkeypatch.setattr(probe, "COMMAND", probe.COMMAND._replace(run=run))
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    assert main(["probe", "local"]) == 3
