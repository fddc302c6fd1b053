"""What every hop kind implements.

A target string is ``//``-separated hops, each ``kind=value`` or ``kind=value,opt=v,...`` (or a bare ``kind``
such as
``local`` or ``sudo``). Two sorts of hop exist:

- *Wrapping hops* (ssh, sudo, and the container/cluster kinds pct, docker, podman, kubectl, lxc, incus,
slurm) turn
  the argv of the command one layer further in into the argv that runs it through this layer. They hold no
  state
  beyond their parsed fields, run nothing, and are compared to lists in tests.
- *Setting hops* (python, venv, conda, cd, env) do not change argv; they tell the far-side agent which
interpreter,
  directory and environment to use. Interpreter discovery runs again after each wrapping hop.

Every argv word a wrapping hop adds must stay inside the safe alphabet (see ``trainprobe.remote.shell``) so
that
the command line parses the same under any login shell an ssh hop meets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote._record import record


@runtime_checkable
class Hop(Protocol):
    #: the key before ``=`` in a target string, e.g. ``"ssh"``
    kind: ClassVar[str]

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> Hop:
        """Build the hop from ``kind=value,opt=v``; raise TargetSyntaxError naming the bad part."""
        ...

    def spec(self) -> str:
        """The hop printed back as it is written in a target string (``parse(...).spec()`` round-trips)."""
        ...


@runtime_checkable
class WrappingHop(Hop, Protocol):
    def wrap(self, inner: Sequence[str]) -> list[str]:
        """The argv that runs ``inner`` on the far side of this hop (stdin passed through, never a TTY)."""
        ...


@record(frozen=True)
class FarSettings:
    """What the setting hops ask of the innermost layer: interpreter, directory, environment.

    Built by folding every setting hop's :meth:`SettingHop.apply` over an empty ``FarSettings``; shipped to
    the
    far side as JSON, so none of it meets a shell (only ``python``/``venv`` paths become argv words).
    """

    python: str | None = None
    venv: str | None = None
    conda: str | None = None
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()


@runtime_checkable
class SettingHop(Hop, Protocol):
    def apply(self, settings: FarSettings) -> FarSettings:
        """``settings`` with this hop's choice added (later hops win)."""
        ...


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
