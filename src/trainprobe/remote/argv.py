"""Pure functions that build the local argv for a target; tests compare them to lists.

Innermost is the bootstrap: ``PY -c BOOT STAGE1 CONFIG`` when ``python=``/``venv=`` names the interpreter,
else
``sh -c 'for p in python3 python; ...'`` which starts the first Python on PATH to run discovery. Every word
is in the
safe alphabet. Then each wrapping hop, innermost first, wraps it; adjacent ssh hops fold into one ``ssh -J``.
"""

from __future__ import annotations

import base64
import functools
import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainprobe.remote._record import replace
from trainprobe.remote.hops.base import FarSettings, WrappingHop
from trainprobe.remote.hops.ssh import SshHop
from trainprobe.remote.target import Target

#: the ``-c`` program every bootstrap runs: decompress stage 1 from argv[1] and run it
BOOT = "import base64,sys,zlib;exec(zlib.decompress(base64.b64decode(sys.argv[1])))"


@functools.cache
def stage1_word() -> str:
    source = Path(__file__).with_name("_stage1.py").read_bytes()
    return base64.b64encode(zlib.compress(source, 9)).decode()


@functools.cache
def agent_source() -> bytes:
    """The agent's source, compressed, as stage 1 reads it from stdin."""
    return zlib.compress(Path(__file__).with_name("agent.py").read_bytes(), 9)


def stage1_config(settings: FarSettings, need: Sequence[str]) -> str:
    cfg: dict[str, Any] = {
        "boot": BOOT,
        "python": settings.python,
        "venv": settings.venv,
        "conda": settings.conda,
        "need": list(need),
    }
    return base64.b64encode(json.dumps(cfg, separators=(",", ":")).encode()).decode()


def bootstrap_argv(settings: FarSettings, need: Sequence[str]) -> list[str]:
    """The innermost command: start Python with stage 1."""
    tail = [BOOT, stage1_word(), stage1_config(settings, need)]
    if settings.python:
        return [settings.python, "-c", *tail]
    if settings.venv:
        return [settings.venv.rstrip("/") + "/bin/python", "-c", *tail]
    script = (
        'for p in python3 python; do command -v "$p" >/dev/null 2>&1 && exec "$p" -c "$0" "$@"; done; '
        'echo "trainprobe: no python3 or python on PATH" >&2; exit 127'
    )
    return ["sh", "-c", script, *tail]


def fold_jumps(hops: Sequence[WrappingHop]) -> list[WrappingHop]:
    """``ssh=a//ssh=b`` → one SshHop for b with jumps=(a,): OpenSSH ProxyJump, no quoting inside quoting."""
    folded: list[WrappingHop] = []
    for hop in hops:
        last = folded[-1] if folded else None
        if isinstance(hop, SshHop) and isinstance(last, SshHop):
            folded[-1] = replace(hop, jumps=(*last.jumps, replace(last, jumps=())))
        else:
            folded.append(hop)
    return folded


def build_argv(
    target: Target,
    *,
    need: Sequence[str] = (),
    connect_timeout: float | None = None,
    control_dir: str | None = None,
    ssh_config: str | None = None,
) -> list[str]:
    """The argv that starts stage 1 on the far side of ``target`` (stdin and stdout are the frame channel)."""
    argv = bootstrap_argv(target.settings, need)
    for hop in reversed(fold_jumps(target.wrapping)):
        if isinstance(hop, SshHop):
            hop = replace(
                hop, connect_timeout=connect_timeout, control_dir=control_dir, config_file=ssh_config
            )
        argv = hop.wrap(argv)
    return argv
