"""The Protocols every hop kind follows (imported only by type checkers and by ``isinstance`` callers).

:mod:`typing` costs every run a few milliseconds, and a run needs none of this at run time: the engine tells a
wrapping hop from a setting hop with :func:`~trainprobe.remote.hops.base.is_wrapping`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from trainprobe.remote.hops.records import FarSettings, HopFailure


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

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """Why this hop failed, when its program's words are in ``transport_log`` (what ssh, the container
        tools and login shells wrote before the agent started) and ``returncode`` (the local program's exit
        status); else None. The hop knows its own tool's messages: no other module holds them."""
        ...


@runtime_checkable
class SettingHop(Hop, Protocol):
    def apply(self, settings: FarSettings) -> FarSettings:
        """``settings`` with this hop's choice added (later hops win)."""
        ...
