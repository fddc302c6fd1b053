"""Where each run keeps its full output, and where ssh keeps its ControlMaster sockets.

Runs: ``$XDG_STATE_HOME/trainprobe/runs/<time>-<target>/`` (``$XDG_STATE_HOME`` defaults to
``~/.local/state``; ``TRAINPROBE_RUNS_DIR`` overrides the whole ``runs`` folder). Each run directory holds
``stdout`` and ``stderr`` (the script's bytes, exactly), ``result.json`` (the agent's exit report),
``meta.json`` (target, argv, interpreter, timings, error) and ``transport.log`` (what ssh and login shells
said on their stderr). When the default place cannot be written (a read-only home), runs go to
``$TMPDIR/trainprobe-runs-<uid>`` instead; a ``TRAINPROBE_RUNS_DIR`` that cannot be written is an error.

Sockets: ``$XDG_RUNTIME_DIR/trainprobe-ssh``, else (unset, unwritable, or too long for a socket path)
``/tmp/trainprobe-ssh-<uid>``, else no connection reuse. A fallback directory is used only if it belongs to
this user and nobody else can write to it.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from trainprobe.errors import UsageError

_counter = itertools.count()
#: the longest ControlMaster directory ssh accepts: a Unix socket path is at most 107 bytes, and ssh binds
#: ``DIR/<40 hex digits of %C>.<16 random characters>`` before renaming it into place
MAX_CONTROL_DIR = 107 - 1 - 40 - 17


def runs_root() -> Path:
    if os.environ.get("TRAINPROBE_RUNS_DIR"):
        return Path(os.environ["TRAINPROBE_RUNS_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "trainprobe" / "runs"


def _private_dir(path: str) -> bool:
    """Make ``path`` (mode 0700) if needed; True if it is a directory of ours that only we can write."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022 and os.access(path, os.W_OK)


def _fallback_runs_root() -> Path:
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"trainprobe-runs-{os.getuid()}"


def new_run_dir(slug: str) -> Path:
    """A fresh directory for one run; unique across threads and processes. UsageError when none can be
    made (the message says where it tried and how to choose another place)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = runs_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = os.access(root, os.W_OK)
    except OSError:
        probe = False
    if not probe:
        if os.environ.get("TRAINPROBE_RUNS_DIR"):
            raise UsageError(f"cannot write run logs to {root} (TRAINPROBE_RUNS_DIR)",
                             hint="set TRAINPROBE_RUNS_DIR to a writable directory")  # fmt: skip
        fallback = _fallback_runs_root()
        if not _private_dir(str(fallback)):
            raise UsageError(
                f"cannot write run logs to {root} nor {fallback}",
                hint="set TRAINPROBE_RUNS_DIR (or XDG_STATE_HOME) to a writable directory",
            )
        root = fallback
    while True:
        path = root / f"{stamp}-{os.getpid()}-{next(_counter)}-{slug}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create the run directory {path}: {exc.strerror}",
                             hint="set TRAINPROBE_RUNS_DIR to a writable directory") from None  # fmt: skip
        return path


def control_dir() -> str | None:
    """Where ssh ControlMaster sockets live (short: a socket path must fit in 108 bytes); None disables reuse.

    ``TRAINPROBE_CONTROL_DIR`` overrides it (UsageError when it is too long or cannot be made); set it empty
    to open a fresh connection every time.
    """
    configured = os.environ.get("TRAINPROBE_CONTROL_DIR")
    if configured is not None:
        if not configured:
            return None
        if len(configured) > MAX_CONTROL_DIR:
            raise UsageError(
                f"TRAINPROBE_CONTROL_DIR is {len(configured)} characters long; ssh's socket paths allow "
                f"{MAX_CONTROL_DIR}",
                hint="choose a shorter directory, or set it empty to turn connection reuse off",
            )
        if not _private_dir(configured):
            raise UsageError(
                f"cannot use {configured} for ssh's sockets (TRAINPROBE_CONTROL_DIR)",
                hint="a directory of yours that only you can write, or empty for no reuse",
            )
        return configured
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    candidates = [os.path.join(runtime, "trainprobe-ssh")] if runtime else []
    candidates.append(f"/tmp/trainprobe-ssh-{os.getuid()}")
    for path in candidates:
        if len(path) <= MAX_CONTROL_DIR and _private_dir(path):
            return path
    return None
