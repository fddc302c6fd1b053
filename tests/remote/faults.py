"""Helpers for the fault tests: login scripts per shell, the fixture sshd's port cut with iptables, and what
is left running on either side after a run.

"Left" means: on the far side, any process of the test user but sshd's own (a kept ControlMaster connection
has one); on the local side, any process below this test process but a ControlMaster (``[mux]``), which
trainprobe keeps on purpose, and the fixture's sshd (the far side).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import SshServer

#: the login script every shell reads for ``ssh host command`` (dash reads none)
RC_FILES = {"zsh": ".zshenv", "tcsh": ".tcshrc", "fish": ".config/fish/config.fish", "bash": ".bashrc"}


@contextlib.contextmanager
def login_script(sshd: SshServer, shell: str, text: str) -> Iterator[Path]:
    """``text`` as the login script of the ``shell`` user, for the duration of the block."""
    path = sshd.setup.home(shell) / RC_FILES[shell]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    try:
        yield path
    finally:
        path.unlink()


@contextlib.contextmanager
def port_cut(port: int) -> Iterator[None]:
    """Every packet to and from ``port`` on loopback dropped (the fixture sshd's own port only)."""
    if not shutil.which("iptables"):
        pytest.skip("needs iptables (see .ci/run)")
    rules = [
        ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
        ["INPUT", "-i", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP"],
    ]
    for rule in rules:
        subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
    try:
        yield
    finally:
        for rule in rules:
            subprocess.run(["iptables", "-D", *rule], capture_output=True)


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root`` (from /proc's parent links): pid -> command line."""
    parent, cmdline = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline[int(name)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return {pid: cmdline.get(pid, "") for pid in found}


def far_leftovers(user: str) -> list[str]:
    found = subprocess.run(["pgrep", "-a", "-u", user], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if not line.split(None, 1)[-1].startswith("sshd")]


#: processes below the test session that were there before the current test (session fixtures' daemons)
_before: set[int] = set()


def remember_processes() -> None:
    """Called before each test (tests/remote/conftest.py): what runs now is not the test's to clean up."""
    _before.clear()
    _before.update(descendants(os.getpid()))


def local_leftovers() -> list[str]:
    """Processes below this test that it started (not the session's daemons) but ControlMasters and the
    fixture's sshd (the far side, checked by user)."""
    below = [(pid, cmd) for pid, cmd in descendants(os.getpid()).items() if pid not in _before]
    return [f"{pid} {cmd}" for pid, cmd in below if cmd and "[mux]" not in cmd and not cmd.startswith("sshd")]


def assert_nothing_left(*users: str, within: float = 2.0) -> None:
    """Nothing of the run on either side ``within`` seconds from now (processes the test started itself
    have to be gone too)."""
    deadline = time.monotonic() + within
    while True:
        left = [*local_leftovers(), *(line for user in users for line in far_leftovers(user))]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left running: {left}")
        time.sleep(0.1)


def wait_for(check: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.05)


def kill_user_processes(user: str, pattern: str) -> None:
    subprocess.run(["pkill", "-KILL", "-u", user, "-f", pattern], capture_output=True)
