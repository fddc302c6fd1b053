"""Helpers for the fault tests: login scripts per shell, the fixture sshd's port cut with iptables, and what
is left running on either side after a run.

"Left" means: on the far side, any live process of the test user but sshd's own (a kept ControlMaster
connection has one); on the local side, any live process below this test process but a ControlMaster
(``[mux]``), which trainprobe keeps on purpose, and the fixture's sshd (the far side). A zombie whose parent
is alive is not left running: its parent reaps it (the machine may be too busy to have done so yet).
:func:`assert_nothing_left` is the one check, used by every test that checks for leftovers.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import SshServer
from waiting import LEFTOVER_DEADLINE_S, POLL_S

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


def _read_proc(pid: int) -> tuple[int, str, int, str] | None:
    """``(parent, state, uid, command line)`` of ``pid`` from /proc, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError):
        return None
    comm = stat[stat.find("(") + 1 : stat.rfind(")")]
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], uid, cmdline or f"[{comm}]"


def processes() -> dict[int, tuple[int, str, int, str]]:
    """Every process: pid -> ``(parent, state, uid, command line)`` (``[comm]`` when it has none)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (entry := _read_proc(int(name))) is not None:
            table[int(name)] = entry
    return table


def _reaped_soon(pid: int, table: dict[int, tuple[int, str, int, str]]) -> bool:
    """A zombie whose parent is alive (not a zombie itself): it is about to be reaped, not left running."""
    entry = table.get(pid)
    if entry is None or entry[1] != "Z":
        return False
    parent = table.get(entry[0])
    return parent is not None and parent[1] != "Z"


def dead(pid: int) -> bool:
    """``pid`` is gone or a zombie (it runs no more; whether its parent has reaped it yet does not matter)."""
    entry = _read_proc(pid)
    return entry is None or entry[1] == "Z"


def descendants(root: int, prune: str = "") -> dict[int, str]:
    """Every live process below ``root`` (from /proc's parent links): pid -> command line. Zombies about
    to be reaped are not counted. With ``prune``, what runs below a process whose command line starts so
    is left out (below the fixture's sshd is the far side, checked by user)."""
    table = processes()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, entry in table.items() if entry[0] in frontier} - found
        found |= frontier
        if prune:
            frontier = {pid for pid in frontier if not table[pid][3].startswith(prune)}
    return {pid: table[pid][3] for pid in sorted(found) if not _reaped_soon(pid, table)}


def far_leftovers(user: str, pattern: str = "") -> list[str]:
    """``pid command line`` of each live process of ``user`` but sshd's own, whose command line matches
    the regular expression ``pattern`` (any when empty). Zombies about to be reaped are not counted."""
    uid = pwd.getpwnam(user).pw_uid
    table = processes()
    return [
        f"{pid} {entry[3]}"
        for pid, entry in sorted(table.items())
        if entry[2] == uid
        and not entry[3].startswith("sshd")
        and not _reaped_soon(pid, table)
        and re.search(pattern, entry[3])
    ]


#: processes below the test session that were there before the current test (session fixtures' daemons)
_before: set[int] = set()


def remember_processes() -> None:
    """Called before each test (tests/remote/conftest.py): what runs now is not the test's to clean up."""
    _before.clear()
    _before.update(descendants(os.getpid()))


def local_leftovers() -> list[str]:
    """Processes below this test that it started (not the session's daemons) but ControlMasters and the
    fixture's sshd (the far side, checked by user)."""
    below = [(pid, cmd) for pid, cmd in descendants(os.getpid(), prune="sshd").items() if pid not in _before]
    return [f"{pid} {cmd}" for pid, cmd in below if cmd and "[mux]" not in cmd and not cmd.startswith("sshd")]


# The deadlines and the polling interval are the suite's own (tests/waiting.py): hang guards, not pauses.


def assert_nothing_left(
    *users: str, within: float = LEFTOVER_DEADLINE_S, pattern: str = "", local: bool = True
) -> None:
    """The one check for leftovers: looks again until nothing of the run is left, on either side (the far
    users' processes matching ``pattern``; with ``local``, what this test started below it), and fails with
    the list once ``within`` seconds pass. Zombies whose parent is about to reap them are not leftovers."""

    def left() -> list[str]:
        far = [line for user in users for line in far_leftovers(user, pattern)]
        return [*(local_leftovers() if local else []), *far]

    deadline = time.monotonic() + within
    while found := left():
        if time.monotonic() > deadline:
            shown = [line if len(line) < 300 else line[:300] + "..." for line in found]
            raise AssertionError(f"left running after {within:g} s: {shown}")
        time.sleep(POLL_S)  # polling interval


def kill_user_processes(user: str, pattern: str) -> None:
    subprocess.run(["pkill", "-KILL", "-u", user, "-f", pattern], capture_output=True)
