"""Pure functions that build the local argv for a target (tests compare them to lists), and what the
bootstrap's failures mean.

Innermost is the bootstrap: ``PY -c BOOT STAGE1 CONFIG`` when ``python=``/``venv=`` names the interpreter,
else (or when that path starts with ``~`` or ``$HOME``, which only the far side can expand) ``sh -c 'for p in
python3 python; ...'`` which starts the first Python on PATH to run discovery. Every
word is in the safe alphabet. Then each wrapping hop, innermost first, wraps it; adjacent ssh hops fold into
one ``ssh -J``.
"""

from __future__ import annotations

import binascii
import marshal
import os
import zlib
from collections.abc import Sequence

from trainprobe.errors import InterpreterNotFoundError
from trainprobe.remote._discovery import names_home
from trainprobe.remote._record import replace
from trainprobe.remote.hops.base import line_with, printable
from trainprobe.remote.hops.records import EXIT_NO_PROGRAM, FarSettings, HopFailure
from trainprobe.remote.hops.ssh import SshHop
from trainprobe.remote.target import Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from trainprobe.remote.hops.protocols import WrappingHop

#: the ``-c`` program every bootstrap runs: decompress stage 1 from argv[1] and run it (binascii, not
#: base64: base64 imports re, which costs the far side milliseconds on every run)
BOOT = "import binascii,sys,zlib;exec(zlib.decompress(binascii.a2b_base64(sys.argv[1])))"
#: what the bootstrap says when the far side has no Python on PATH
NO_PYTHON_ON_PATH = "trainprobe: no python3 or python on PATH"
_HERE = os.path.dirname(os.path.abspath(__file__))
_stage1_word: list[str] = []  # computed once (not functools.cache: functools is not on a run's path)


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode()


def stage1_word() -> str:
    """Stage 1's source, compressed and base64-encoded: one argv word in the safe alphabet."""
    if not _stage1_word:
        with open(os.path.join(_HERE, "_stage1.py"), "rb") as f:
            _stage1_word.append(_b64(zlib.compress(f.read(), 9)))
    return _stage1_word[0]


def stage1_config(settings: FarSettings, need: Sequence[str]) -> str:
    """Stage 1's settings, marshal-ed (version 4, which every Python from 3.4 reads) and base64-encoded."""
    cfg = {
        "boot": BOOT,
        "python": settings.python,
        "venv": settings.venv,
        "conda": settings.conda,
        "need": list(need),
    }
    return _b64(marshal.dumps(cfg, 4))


def bootstrap_argv(settings: FarSettings, need: Sequence[str]) -> list[str]:
    """The innermost command: start Python with stage 1."""
    tail = [BOOT, stage1_word(), stage1_config(settings, need)]
    # A path under ``~`` or ``$HOME`` means nothing to exec (no shell expands it, by design): the first Python
    # on PATH starts stage 1, whose discovery expands the path and ``exec``-s the interpreter it names.
    if settings.python and not names_home(settings.python):
        return [settings.python, "-c", *tail]
    if settings.venv and not names_home(settings.venv):
        return [settings.venv.rstrip("/") + "/bin/python", "-c", *tail]
    script = (
        'for p in python3 python; do command -v "$p" >/dev/null 2>&1 && exec "$p" -c "$0" "$@"; done; '
        f'echo "{NO_PYTHON_ON_PATH}" >&2; exit 127'
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


def explain_bootstrap_failure(transport_log: str, returncode: int | None) -> HopFailure | None:
    """What went wrong between the innermost hop and stage 1's hello: no Python, a Python too old or broken
    to start, a named interpreter that is not there. None when the log does not say."""
    name_one = "name a working interpreter with python=, venv= or conda="
    if line_with(transport_log, (NO_PYTHON_ON_PATH,)):
        why, hint = "no python3 or python on the far side's PATH", "install Python 3.7 or newer there"
        return HopFailure(InterpreterNotFoundError, why, hint + ", or " + name_one, EXIT_NO_PROGRAM)
    broken = ("fatal python error", "could not find platform", "no module named 'encodings'")
    if line := line_with(transport_log, broken):
        why = f"the far side's Python does not start: {line}"
        return HopFailure(InterpreterNotFoundError, why, name_one, EXIT_NO_PROGRAM)
    if line := line_with(transport_log, ("syntaxerror",)):
        why = f"the far-side Python is too old for trainprobe's agent (it needs 3.7 or newer): {line}"
        return HopFailure(InterpreterNotFoundError, why, name_one, EXIT_NO_PROGRAM)
    if returncode in (126, EXIT_NO_PROGRAM):
        words = ("not found", "no such file", "permission denied", "cannot execute", "exec format error")
        said = line_with(transport_log, words) or f"exit {returncode}"
        why = f"no Python interpreter on the far side: {said}"
        return HopFailure(InterpreterNotFoundError, why, "name one with python=PATH", EXIT_NO_PROGRAM)
    return None


def last_words(transport_log: str) -> str:
    """The last line of the log worth quoting: printable, not a notice ssh or a locale prints every run."""
    harmless = ("warning: permanently added", "setlocale", "pseudo-terminal will not be allocated")
    for line in reversed(transport_log.splitlines()):
        shown = printable(line)
        if shown and not any(word in shown.lower() for word in harmless):
            return shown
    return ""
