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
from trainprobe.remote import shell
from trainprobe.remote.hops.records import EXIT_NO_PROGRAM, HopFailure

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every run (see protocols.py)
if TYPE_CHECKING:
    from typing import ClassVar, TypeGuard

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


def check_name(kind: str, value: str, what: str) -> str:
    """A container, pod or job name: safe alphabet, no leading ``-`` (it would read as an option)."""
    shell.check_word(value, what)
    if value.startswith("-") or " " in value:
        raise TargetSyntaxError("", f"{kind}={value}: {what} may not start with '-' or contain spaces")
    return value


def name_option(kind: str, options: Mapping[str, str], key: str, what: str | None = None) -> str | None:
    """Option ``key`` checked as a name (:func:`check_name`, called ``what``), or None when not given."""
    value = options.get(key) or None
    return None if value is None else check_name(kind, value, what or key)


def path_option(kind: str, name: str, options: Mapping[str, str], key: str, what: str) -> str | None:
    """Option ``key``: an absolute path in the safe alphabet, or None when it is not given."""
    value = options.get(key) or None
    if value is not None:
        shell.check_word(value, what)
        if not value.startswith("/"):
            raise TargetSyntaxError("", f"{kind}={name}: {key}= must be an absolute path, got {value!r}")
    return value


def flag(name: str, value: object | None) -> list[str]:
    """``[name, value]`` for an option that is set, ``[]`` for one that is not."""
    return [] if value is None else [name, str(value)]


def spec_with(head: str, options: Sequence[tuple[str, object | None]]) -> str:
    """``head`` and its options that are set, as written in a target string: ``kind=value,key=v,...``."""
    return head + "".join(f",{key}={value}" for key, value in options if value is not None)


class EnteringHop:
    """A wrapping hop that enters a container, a pod or a job step through one program where the hop before
    it runs. It knows that program's words for failing: ``failures`` (see :func:`explain_by_table`), with
    the fields :meth:`failure_values` fills in, and the shell's for the program not being installed."""

    kind: ClassVar[str]
    program: ClassVar[str]
    failures: ClassVar[tuple[tuple[str, str, str], ...]]

    def __init_subclass__(cls, *, kind: str = "", program: str = "", **rest: object) -> None:
        """A hop class names its kind and program in its header, ``class DockerHop(EnteringHop,
        kind="docker", program="docker")`` (a subclass that names neither keeps its base's)."""
        super().__init_subclass__(**rest)
        if kind:
            cls.kind = kind
        if program:
            cls.program = program

    @classmethod
    def parse_name(
        cls, value: str | None, options: Mapping[str, str], allowed: Sequence[str], example: str, what: str
    ) -> str:
        """The hop's value as a name (:func:`check_name`, called ``what``; ``example`` shows how it is written
        when it is missing), once its options are checked against ``allowed``."""
        no_options(cls.kind, options, allowed)
        return check_name(cls.kind, need_value(cls.kind, value, example), what)

    def failure_values(self) -> Mapping[str, object]:
        raise NotImplementedError

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """The program's words for this hop failing (see ``failures``), or the program not installed."""
        return missing_program(transport_log, self.program, "where this hop runs") or explain_by_table(
            transport_log, self.failures, self.failure_values()
        )


__all__ = [
    "EnteringHop", "check_name", "explain_by_table", "flag",
    "is_setting", "is_wrapping", "line_with", "missing_program", "name_option", "need_value", "no_options",
    "path_option", "printable", "spec_with",
]  # fmt: skip
