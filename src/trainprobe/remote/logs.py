"""Where each run keeps its full output: ``$XDG_STATE_HOME/trainprobe/runs/<time>-<target>/``.

``$XDG_STATE_HOME`` defaults to ``~/.local/state``; ``TRAINPROBE_RUNS_DIR`` overrides the whole ``runs``
folder.
Each run directory holds ``stdout`` and ``stderr`` (the script's bytes, exactly), ``result.json`` (the
agent's exit
report), ``meta.json`` (target, argv, interpreter, timings, error) and ``transport.log`` (what ssh and login
shells
said on their stderr).
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

_counter = itertools.count()


def runs_root() -> Path:
    if os.environ.get("TRAINPROBE_RUNS_DIR"):
        return Path(os.environ["TRAINPROBE_RUNS_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "trainprobe" / "runs"


def new_run_dir(slug: str) -> Path:
    """A fresh directory for one run; unique across threads and processes."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = runs_root()
    root.mkdir(parents=True, exist_ok=True)
    while True:
        path = root / f"{stamp}-{os.getpid()}-{next(_counter)}-{slug}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path


def control_dir() -> str | None:
    """Where ssh ControlMaster sockets live (short: a socket path must fit in 108 bytes); None disables reuse.

    ``TRAINPROBE_CONTROL_DIR`` overrides it; set it empty to open a fresh connection every time.
    """
    configured = os.environ.get("TRAINPROBE_CONTROL_DIR")
    if configured is not None:
        path = configured
    else:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        path = os.path.join(runtime, "trainprobe-ssh") if runtime else f"/tmp/trainprobe-ssh-{os.getuid()}"
    if not path:
        return None
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path
