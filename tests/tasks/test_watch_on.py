"""``watch --on`` (:func:`trainprobe.tasks.watch_on`) through the real remote engine: the far side follows
the file across rotation, and after the link drops (the far-side follower is killed) the next connection
resumes at the last byte received: no line lost or repeated. Runs on the ``local`` target and through the
loopback sshd."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from fixtures.sshd import SshServer
from metrics.synthetic import seed_story_lines
from trainprobe.tasks.watch import RemoteFollower, watch_on
from waiting import EVENT_DEADLINE_S, wait_for


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _follow_through_drops_and_rotation(target: str, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    got: list[str] = []
    follower = RemoteFollower(target, str(log), got.extend, interval=0.05, reconnect_delay=0.1)
    cancel = threading.Event()
    thread = threading.Thread(target=follower.run, args=(cancel,), daemon=True)
    thread.start()
    try:
        want = [f"line {i} loss {i / 7:.3f}" for i in range(3000)]
        _append(log, want[:1000])  # created after the follower started: it waits for it
        wait_for(lambda: len(got) >= 1000, what="the lines")
        first_pid = follower.remote_pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)  # the link drops mid-run...
        _append(log, want[1000:1500])  # ...while the file keeps growing
        os.rename(log, tmp_path / "train.log.1")  # and rotates before we are back
        _append(log, want[1500:2000])
        wait_for(lambda: len(got) >= 2000, what="the lines")
        assert follower.connections >= 2
        assert follower.remote_pid != first_pid
        _append(log, want[2000:])
        wait_for(lambda: len(got) >= 3000, what="the lines")
        # not a wait for an event: a short look for lines that should not come (a duplicate after the
        # reconnect); the order and the count are checked by the line below whatever this finds
        time.sleep(0.3)  # see the comment above
        assert got == want  # every line once, in order
    finally:
        cancel.set()
        thread.join(EVENT_DEADLINE_S)
    assert not thread.is_alive()


def test_remote_follow_on_local_target(tmp_path: Path) -> None:
    _follow_through_drops_and_rotation("local", tmp_path)


@pytest.mark.ssh
def test_remote_follow_through_ssh(sshd: SshServer, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)  # the fixture's unprivileged users must be able to read it
    _follow_through_drops_and_rotation(sshd.target("root"), tmp_path)


def test_watch_on_reports_the_seed_story(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = list(seed_story_lines(4400))
    _append(log, lines)
    found: list[tuple[str, float]] = []
    cancel = threading.Event()
    result: list[object] = []
    thread = threading.Thread(
        target=lambda: result.append(
            watch_on("local", str(log), lambda f: found.append((f.kind, f.step)), interval=0.2, cancel=cancel)
        ),
        daemon=True,
    )
    thread.start()
    wait_for(lambda: ("cliff", 4229.0) in found, what="the cliff")
    cancel.set()
    thread.join(EVENT_DEADLINE_S)
    want = [("spike", 2029.0), ("spike", 4021.0), ("cliff", 4229.0), ("stall", 2000.0), ("stall", 4001.0)]
    assert sorted(found) == sorted(want), found
