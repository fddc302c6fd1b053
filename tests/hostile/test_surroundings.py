"""Hostile surroundings the data-driven cases cannot express: a FIFO given as the path, a ``**`` glob over a
directory symlink to itself, a folder unreadable to the user running the CLI (run as ``nobody``: root reads
mode 000), and a checkpoint truncated while it is read. Each through scan, check, diff and triage: exit code,
time (< 10 s) and peak RSS asserted; never a traceback, never exit 0."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hostile.craft import f32, safetensors
from hostile.limits import HANG_GUARD_S, run_trainprobe

HEADER = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
SECONDS = 10.0  # CPU seconds per command (Outcome.within): the bound, whatever the machine's load
RSS_MB = 400.0


def nan_file(path: Path) -> Path:
    return safetensors(path, HEADER, f32(float("nan"), 1.0))


def argvs(target: str) -> dict[str, list[str]]:
    return {
        "scan": ["scan", target],
        "check": ["check", target],
        "diff": ["diff", target, target],
        "triage": ["triage", target],
    }


def test_fifo_as_the_path(tmp_path: Path) -> None:
    fifo = tmp_path / "model.pt"
    os.mkfifo(fifo)
    for command, argv in argvs(str(fifo)).items():
        if command == "triage":
            argv = ["triage", str(tmp_path)]
        out = run_trainprobe(argv)
        assert not out.timed_out, out.describe()
        assert not out.traceback, out.describe()
        assert out.code == 2, out.describe()
        assert out.within(SECONDS), out.describe()
        assert out.max_rss_mb < RSS_MB, out.describe()


def test_glob_does_not_follow_a_directory_symlink(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    nan_file(d / "model.safetensors")
    os.symlink(".", d / "a")
    pattern = str(d / "**" / "*.safetensors")
    for argv in (["scan", pattern], ["check", pattern]):
        out = run_trainprobe(argv)
        assert out.code == 1, out.describe()
        assert not out.traceback, out.describe()
        assert out.within(SECONDS), out.describe()
        assert out.max_rss_mb < RSS_MB, out.describe()
        assert "NON-FINITE" in out.stdout or "nonfinite" in out.stdout, out.describe()


def _nobody() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    return entry.pw_uid, entry.pw_gid


def _run_as(uid: int, gid: int, argv: list[str]) -> tuple[int, str, float, float]:
    def demote() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainprobe", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=demote,
            env={**os.environ, "COLUMNS": "200", "HOME": "/tmp"},
        )
    except PermissionError:
        pytest.skip("the interpreter is not reachable by nobody here (the long-path case covers 'not read')")
    timer = threading.Timer(HANG_GUARD_S, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        text = proc.stdout.read().decode("utf-8", "replace")
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, text, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as nobody")
def test_unreadable_folder_is_not_read(tmp_path: Path) -> None:
    uid, gid = _nobody()
    run = tmp_path / "run"
    run.mkdir()
    nan_file(run / "ok.safetensors")
    hidden = run / "secret"
    hidden.mkdir()
    nan_file(hidden / "bad.safetensors")
    (hidden / "train.jsonl").write_text('{"step": 1, "loss": NaN}\n')
    for p in (tmp_path, run, run / "ok.safetensors"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(hidden, 0)
    os.chmod(tmp_path.parent, 0o755)
    try:
        for command, argv in argvs(str(run)).items():
            code, text, seconds, rss = _run_as(uid, gid, argv)
            assert "Traceback" not in text, text
            assert code != 0, f"{command}: {text}"
            assert seconds < SECONDS, f"{command}: {seconds:.1f}s CPU {rss:.0f} MB"
            assert rss < RSS_MB, f"{command}: {seconds:.1f}s {rss:.0f} MB"
            if command != "diff":
                assert "secret" in text, f"{command}: {text}"
                assert "not read" in text, f"{command}: {text}"
    finally:
        os.chmod(hidden, 0o755)


def _truncate_soon(path: Path, after: float) -> Callable[[], float]:
    """Truncate ``path`` to 4 KiB in ``after`` seconds; the returned join gives when it was cut."""
    cut: list[float] = []

    def go() -> None:
        time.sleep(after)  # the moment of the cut is the input
        os.truncate(path, 4096)
        cut.append(time.perf_counter())

    thread = threading.Thread(target=go)
    thread.start()

    def join() -> float:
        thread.join()
        return cut[0]

    return join


@pytest.mark.parametrize("after", [0.0, 0.3, 0.45, 0.6])
def test_truncated_while_read_is_never_sigbus(tmp_path: Path, after: float) -> None:
    import numpy as np

    n = 96 << 20  # float32 elements: 384 MiB, long enough to be cut mid-read
    path = tmp_path / "big.safetensors"
    header = f'{{"w": {{"dtype": "F32", "shape": [{n}], "data_offsets": [0, {4 * n}]}}}}'.encode()
    with open(path, "wb") as fh:
        fh.write(len(header).to_bytes(8, "little") + header)
        block = np.ones(1 << 22, dtype=np.float32).tobytes()
        for _ in range(n >> 22):
            fh.write(block)
    join = _truncate_soon(path, after)
    out = run_trainprobe(["scan", str(path)])
    ended = time.perf_counter()
    cut_at = join()
    assert out.signal is None, out.describe()
    assert not out.traceback, out.describe()
    if cut_at < ended:  # cut before or while it was read: changed while read / truncated, never clean
        assert out.code in (1, 2), out.describe()
    assert out.within(SECONDS), out.describe()


def test_deep_tree_is_walked_without_recursion(tmp_path: Path, deep_tree: Path) -> None:
    """A NaN checkpoint 1,100 levels down: every command finds it (an explicit-stack walk), no recursion."""
    nan_file(deep_tree / "model.safetensors")
    for command, argv in argvs(str(tmp_path)).items():
        out = run_trainprobe(argv)
        assert not out.traceback, out.describe()
        assert out.code == 1, f"{command}: {out.describe()}"
        assert out.within(SECONDS), out.describe()
        assert out.max_rss_mb < RSS_MB, out.describe()
