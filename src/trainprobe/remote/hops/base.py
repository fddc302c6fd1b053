"""What every hop kind implements, and the helpers they share.

A target string is ``//``-separated hops, each ``kind=value`` or ``kind=value,opt=v,...`` (or a bare ``kind``
such as ``local`` or ``sudo``). Two sorts of hop exist (their Protocols are in
:mod:`~trainprobe.remote.hops.protocols`, the values they hand the engine in
:mod:`~trainprobe.remote.hops.records`):

- *Wrapping hops* (local, ssh, sudo, and the container/cluster kinds pct, docker, podman, kubectl, lxc, incus,
  slurm) turn the argv of the command one layer further in into the argv that runs it through this layer, and
  explain their own tool's failure messages (:meth:`WrappingHop.explain_failure`, a :class:`HopFailure`).
  They hold no state beyond their parsed fields, run nothing, and are compared to lists in tests.
- *Setting hops* (python, venv, conda, cd, env) do not change argv; they tell the far-side agent which
  interpreter, directory and environment to use. Interpreter discovery runs again after each wrapping hop.

Every argv word a wrapping hop adds must stay inside the safe alphabet (see ``trainprobe.remote.shell``) so
that the command line parses the same under any login shell an ssh hop meets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainprobe.errors import TargetSyntaxError, UnreachableError
from trainprobe.remote.hops.records import EXIT_NO_PROGRAM, FarSettings, HopFailure

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every run (see protocols.py)
if TYPE_CHECKING:
    from typing import TypeGuard

    from trainprobe.remote.hops.protocols import Hop, SettingHop, WrappingHop


def is_wrapping(hop: Hop) -> TypeGuard[WrappingHop]:
    """True for a wrapping hop (it has ``wrap``), without :mod:`typing`'s ``isinstance`` on a Protocol."""
    return hasattr(hop, "wrap")


def is_setting(hop: Hop) -> TypeGuard[SettingHop]:
    """True for a setting hop (it has ``apply``)."""
    return hasattr(hop, "apply")


def printable(line: str, limit: int = 200) -> str:
    """``line`` with control characters and binary shown escaped, cut to ``limit`` characters."""
    shown = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in line.strip())
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def line_with(transport_log: str, needles: Sequence[str]) -> str | None:
    """The last line of ``transport_log`` that holds one of ``needles`` (any case), shown printable."""
    lowered_needles = [needle.lower() for needle in needles]
    for line in reversed(transport_log.splitlines()):
        lowered = line.lower()
        if any(needle in lowered for needle in lowered_needles):
            return printable(line)
    return None


def missing_program(transport_log: str, program: str, where: str) -> HopFailure | None:
    """A shell's "PROGRAM: command not found" (bash, zsh, fish, dash's "PROGRAM: not found", tcsh's
    "PROGRAM: Command not found.") as one failure: the hop's program is not installed ``where``."""
    lowered = transport_log.lower()
    words = (f"{program}: command not found", f"{program}: not found", f"unknown command: {program}",
             f"exec: {program}: not found", f"{program}: no such file or directory")  # fmt: skip
    if not any(word in lowered for word in words):
        return None
    return HopFailure(
        UnreachableError,
        f"{program} is not installed {where} (not found on PATH)",
        f"install {program} there, or check the PATH its login shell sets",
        EXIT_NO_PROGRAM,
    )


def explain_by_table(
    transport_log: str, table: Sequence[tuple[str, str, str]], values: Mapping[str, object]
) -> HopFailure | None:
    """The first ``(needle, why, what to try)`` of ``table`` whose needle is in ``transport_log``, with
    ``{name}`` fields filled from ``values``, as an UnreachableError failure (the container or job is not
    there: the hop cannot be passed)."""
    text = transport_log.lower()
    for needle, why, hint in table:
        if needle in text:
            return HopFailure(UnreachableError, why.format(**values), hint.format(**values))
    return None


def no_options(kind: str, options: Mapping[str, str], allowed: Sequence[str] = ()) -> None:
    """Raise TargetSyntaxError for an option ``kind`` does not take, listing the ones it does."""
    for key in options:
        if key not in allowed:
            valid = ", ".join(allowed) if allowed else "none"
            raise TargetSyntaxError("", f"{kind}= has no option {key!r} (options: {valid})")


def need_value(kind: str, value: str | None, example: str) -> str:
    """``value`` or a TargetSyntaxError showing how the hop is written."""
    if not value:
        raise TargetSyntaxError("", f"{kind}= needs a value, e.g. {example}")
    return value


# EXIT_NO_PROGRAM, FarSettings and HopFailure live in .records; listed here only until remote/target.py and
# remote/argv.py import them from there (then they go: see TRANSITIONAL_RELAYS in tests/test_layers.py).
__all__ = [
    "EXIT_NO_PROGRAM", "FarSettings", "HopFailure",
    "explain_by_table", "is_setting", "is_wrapping", "line_with", "missing_program", "need_value",
    "no_options", "printable",
]  # fmt: skip
