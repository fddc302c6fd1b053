"""``run`` and ``call``: the Python API of the remote engine (re-exported by :mod:`trainprobe.remote`).

:func:`run` is the one path every run takes (the CLI's ``trainprobe run``, fleets, ``probe``, ``call``): it
imports only what a run needs (no :mod:`dataclasses`, :mod:`inspect` or :mod:`typing`; a test guards the
list), parses the target once and hands the :class:`~trainprobe.remote.target.Target` down to the session.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from trainprobe.errors import UsageError
from trainprobe.remote.argv import build_argv
from trainprobe.remote.logs import control_dir
from trainprobe.remote.session import CONNECT_TIMEOUT_S, Module, RunResult, Sink, execute
from trainprobe.remote.target import Target, parse_target

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import Any


def _script(script: str | os.PathLike[str]) -> tuple[bytes, str]:
    """(source bytes, filename for tracebacks); a str naming an existing file is a path, else source."""
    if isinstance(script, os.PathLike) or ("\n" not in script and os.path.isfile(script)):
        path = Path(script).resolve()
        try:
            return path.read_bytes(), str(path)
        except OSError as exc:
            raise UsageError(f"cannot read script {path}: {exc.strerror}") from None
    return script.encode(), "<script>"


def check_seconds(name: str, value: float | None, *, optional: bool) -> float | None:
    """``value`` as a limit in seconds: a positive number (infinity or None: no limit, where allowed).

    UsageError for NaN, zero, a negative number or a non-number, which would otherwise mean "no limit" or
    "stop at once" without saying so."""
    if value is None and optional:
        return None
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if math.isinf(seconds) and seconds > 0 and optional:
        return None
    if not seconds > 0 or math.isinf(seconds):
        allowed = "a positive number of seconds" + (" (or none for no limit)" if optional else "")
        raise UsageError(f"{name} must be {allowed}, got {value!r}")
    return seconds


def run(
    target: str | Target,
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    need: Sequence[str] = (),
    stdout: Sink | None = None,
    stderr: Sink | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    modules: Sequence[Module] = (),
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run a Python script on ``target`` and return what happened.

    ``script`` is a path (``Path``, or a ``str`` naming an existing file) or Python source text. It runs on
    the far side as ``__main__`` with ``sys.argv = [script_path, *args]``; tracebacks show the local path.
    If it defines ``main()`` (called by trainprobe, or by the script under ``if __name__ == "__main__":``),
    main's JSON-serialisable return value comes back as ``RunResult.result``.

    ``timeout`` bounds the whole run (seconds; None or infinity: no limit); ``connect_timeout`` bounds
    connecting, authenticating and login scripts until the far side's hello, and again from there until the
    agent is ready. ``need`` lists modules the interpreter must have (discovery picks the first that has
    them). ``stdout``/``stderr`` receive the script's output live, as raw byte chunks, on the calling thread.
    ``log_dir`` is where the run's full logs go (default: a new directory under
    ``$XDG_STATE_HOME/trainprobe/runs``). ``modules`` are shipped and importable from memory on the far side.
    Setting ``cancel`` stops the run (the far side is killed). In the main thread, SIGTERM and SIGHUP stop
    the run the same way (exit code 128 + the signal) unless the application handles them itself.

    Only what is wrong before anything starts raises: a malformed target (TargetSyntaxError), an unreadable
    script, a timeout that is not a positive number, no writable run directory (UsageError). Every failure of
    the run itself is carried in ``RunResult.error`` (a RemoteError) with a matching ``exit_code``, so that a
    thread pool can run many targets and collect every outcome; ``result.raise_for_error()`` raises it.
    Thread-safe.

    Uses ``TRAINPROBE_SSH_CONFIG`` (an ssh ``-F`` file) and ``TRAINPROBE_CONTROL_DIR`` (ControlMaster sockets;
    empty disables connection reuse) from the environment.
    """
    parsed = target if isinstance(target, Target) else parse_target(target)
    limit = check_seconds("timeout", timeout, optional=True)
    connect_limit = check_seconds("connect_timeout", connect_timeout, optional=False)
    assert connect_limit is not None
    source, filename = _script(script)
    argv = build_argv(
        parsed,
        need=need,
        connect_timeout=connect_limit,
        control_dir=control_dir(),
        ssh_config=os.environ.get("TRAINPROBE_SSH_CONFIG") or None,
    )
    return execute(
        parsed,
        argv,
        script=source,
        filename=filename,
        args=[str(a) for a in args],
        modules=modules,
        timeout=limit,
        connect_timeout=connect_limit,
        stdout=stdout,
        stderr=stderr,
        log_dir=Path(log_dir) if log_dir else None,
        cancel=cancel,
    )


def call(
    target: str | Target,
    function: Callable[..., Any],
    *args: Any,
    timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    need: Sequence[str] = (),
    modules: Sequence[str] = (),
    far_paths: Sequence[str] = (),
    **kwargs: Any,
) -> Any:
    """Call ``function(*args, **kwargs)`` on ``target`` and return its value.

    The function's module is shipped (see :func:`~trainprobe.remote.shipping.modules_for`) and imported from
    memory on the far side, so nothing needs to be installed there but Python (and numpy, for trainprobe's
    checkpoint readers). ``modules`` names more modules or packages to ship, for a function that imports
    beyond its own subpackage (``modules=["trainprobe.checkpoint", "trainprobe.metrics"]``; see
    :func:`~trainprobe.remote.shipping.modules_named`). ``far_paths`` names the arguments that are paths on
    the far side (``"0"``, a keyword, ``"1.checkpoints"``): their ``~`` and ``$HOME`` expand there (see
    :func:`~trainprobe.remote.shipping.call_argv`). Arguments and the return value travel as JSON; a
    return value with a ``to_json()`` method comes back as what that returns. Raises the run's RemoteError
    (RemoteExceptionError carries the remote traceback).
    """
    from trainprobe.errors import RemoteError
    from trainprobe.remote.shipping import CALL_DRIVER, call_argv

    argv, shipped = call_argv(function, args, kwargs, modules, far_paths)
    outcome = run(
        target,
        CALL_DRIVER,
        argv,
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=need,
        modules=shipped,
    )
    outcome.raise_for_error()
    if outcome.exit_code:
        why = f"the call exited with {outcome.exit_code}"
        hint = f"its stdout and stderr are in {outcome.log_dir}"
        raise RemoteError(outcome.target, why, hint=hint)
    return outcome.result


def __getattr__(name: str) -> object:
    """``modules_for``, ``modules_named``, ``call_argv`` and ``CALL_DRIVER`` live in
    :mod:`trainprobe.remote.shipping` now; still importable from here."""
    if name in ("modules_for", "modules_named", "call_argv", "CALL_DRIVER"):
        from trainprobe.remote import shipping

        return getattr(shipping, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
