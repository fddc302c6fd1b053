"""The engine end to end on the ``local`` target: the same stage 1, agent and framing as through ssh."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest

from trainprobe.errors import (
    InterpreterNotFoundError,
    RemoteExceptionError,
    RemoteKilledError,
    RemoteTimeoutError,
)
from trainprobe.remote import run
from waiting import wait_for

from .faults import assert_nothing_left, dead
from .scripts import BIG_OUTPUT, NASTY_ARGS, SLEEPER, TRICKY_SCRIPT, TRICKY_STDOUT_START, big_output_digest


def test_script_and_arguments_arrive_intact(tmp_path: Path) -> None:
    script = tmp_path / "tricky.py"
    script.write_text(TRICKY_SCRIPT)
    chunks: list[bytes] = []
    result = run("local", script, NASTY_ARGS, stdout=chunks.append)
    assert result.error is None
    assert result.exit_code == 0
    out = b"".join(chunks).decode()
    assert out.startswith(TRICKY_STDOUT_START)
    assert json.loads(out.splitlines()[-1]) == NASTY_ARGS
    assert result.result == {"argv": NASTY_ARGS, "name": "wörld", "emoji": "🚀"}
    assert result.log_dir is not None
    assert (result.log_dir / "stdout").read_bytes() == b"".join(chunks)
    meta = json.loads((result.log_dir / "meta.json").read_text())
    assert meta["exit_code"] == 0
    assert meta["target"] == "local"


def test_exit_codes_propagate() -> None:
    assert run("local", "import sys\nsys.exit(7)\n").exit_code == 7
    assert run("local", "raise SystemExit('bye')\n").exit_code == 1
    assert run("local", "import os\nos._exit(3)\n").exit_code == 3
    assert run("local", "pass\n").exit_code == 0


def test_main_under_the_guard_returns_its_value_once() -> None:
    script = (
        "calls = []\ndef main():\n    calls.append(1)\n    return len(calls)\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert run("local", script).result == 1


def test_the_script_compiles_with_its_own_future_flags() -> None:
    # The agent itself uses `from __future__ import annotations`; the user's script must not inherit it.
    with_main = "def f(x: int) -> None: ...\ndef main():\n    return f.__annotations__['x'] is int\n"
    without_main = "def f(x: int) -> None: ...\nprint(f.__annotations__['x'] is int)\n"
    assert run("local", with_main).result is True
    printed: list[bytes] = []
    assert run("local", without_main, stdout=printed.append).exit_code == 0
    assert b"".join(printed).strip() == b"True"


def test_remote_traceback_shows_the_local_path_and_line(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("import sys\n\n\ndef main():\n    return 1 / 0  # the bad line\n")
    errors: list[bytes] = []
    result = run("local", script, stderr=errors.append)
    assert isinstance(result.error, RemoteExceptionError)
    assert result.exit_code == 1
    assert "ZeroDivisionError: division by zero" in str(result.error)
    assert f'File "{script}", line 5, in main' in result.error.remote_traceback
    printed = b"".join(errors).decode()
    assert "return 1 / 0  # the bad line" in printed
    assert printed.startswith(
        "Traceback (most recent call last):\n  File " + repr(str(script)).replace("'", '"')
    )
    assert "trainprobe-agent" not in printed


def test_non_utf8_and_large_output_arrive_whole() -> None:
    chunks: list[bytes] = []
    result = run("local", BIG_OUTPUT, ["8"], stdout=chunks.append)
    assert result.ok, result.error
    data = b"".join(chunks)
    assert len(data) == 8 << 20
    assert hashlib.sha256(data).hexdigest() == big_output_digest(8)
    assert result.stdout_path is not None
    assert hashlib.sha256(result.stdout_path.read_bytes()).hexdigest() == big_output_digest(8)


@pytest.mark.timing
def test_timeout_kills_the_script_and_its_children() -> None:
    pids: list[bytes] = []
    start = time.monotonic()
    result = run("local", SLEEPER, timeout=5.0, stdout=pids.append)
    elapsed = time.monotonic() - start
    assert isinstance(result.error, RemoteTimeoutError)
    assert result.exit_code == 124
    assert "timed out after 5 s" in str(result.error)
    assert elapsed < 5 + 10  # the kill's grace, with room for a loaded machine
    parent, child = (int(p) for p in b"".join(pids).split())
    wait_for(lambda: dead(parent) and dead(child), what="the script's and its child's death")
    assert_nothing_left()


@pytest.mark.timing
def test_cancel_kills_the_run() -> None:
    cancel = threading.Event()
    pids: list[bytes] = []

    def got(data: bytes) -> None:
        pids.append(data)
        if b"\n" in b"".join(pids):
            cancel.set()

    result = run("local", SLEEPER, stdout=got, cancel=cancel)
    assert isinstance(result.error, RemoteKilledError)
    assert result.exit_code == 130
    parent, child = (int(p) for p in b"".join(pids).split())
    wait_for(lambda: dead(parent) and dead(child), what="the script's and its child's death")
    assert_nothing_left()


def test_need_that_nobody_has_lists_what_was_tried() -> None:
    result = run("local", "pass\n", need=["tp_no_such_module_xyz"])
    assert isinstance(result.error, InterpreterNotFoundError)
    assert result.exit_code == 127
    message = str(result.error)
    assert "no interpreter has tp_no_such_module_xyz" in message
    assert "lacks tp_no_such_module_xyz" in message


def test_need_picks_an_interpreter_that_has_the_module() -> None:
    result = run("local", "import json, sys\ndef main():\n    return sys.executable\n", need=["json"])
    assert result.ok
    assert result.result == result.python


def test_a_missing_named_interpreter_is_one_clear_error() -> None:
    result = run("local//python=/nonexistent/python3", "pass\n")
    assert isinstance(result.error, InterpreterNotFoundError)
    assert result.exit_code == 127
    assert "/nonexistent/python3" in str(result.error)


def test_settings_hops_set_directory_and_environment(tmp_path: Path) -> None:
    script = "import os\ndef main():\n    return [os.getcwd(), os.environ['TP_X'], os.environ['TP_Y']]\n"
    target = f"local//cd={tmp_path}//env=TP_X=a b//env=TP_Y=0,1"
    assert run(target, script).result == [str(tmp_path), "a b", "0,1"]


def test_runs_in_parallel_threads_stay_apart() -> None:
    from concurrent.futures import ThreadPoolExecutor

    script = "import sys\nprint(sys.argv[1])\ndef main():\n    return int(sys.argv[1])\n"
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: run("local", script, [str(i)]), range(8)))
    assert [r.result for r in results] == list(range(8))
    assert len({r.log_dir for r in results}) == 8
    for i, r in enumerate(results):
        assert r.stdout_path is not None
        assert r.stdout_path.read_text() == f"{i}\n"


def test_a_python_too_old_for_the_agent_is_named(tmp_path: Path) -> None:
    # A stand-in for Python 2.7/3.6 (CI has neither): it fails on stage 1 the way they do.
    old = tmp_path / "python"
    old.write_text('#!/bin/sh\necho "SyntaxError: future feature annotations is not defined" >&2\nexit 1\n')
    old.chmod(0o755)
    result = run(f"local//python={old}", "pass\n")
    assert isinstance(result.error, InterpreterNotFoundError)
    assert result.exit_code == 127
    assert "too old" in str(result.error)
