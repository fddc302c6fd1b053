"""``local``: run on this machine; the argv is used as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote._record import record
from trainprobe.remote.hops.base import no_options
from trainprobe.remote.hops.records import HopFailure

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import ClassVar


@record(frozen=True)
class LocalHop:
    kind: ClassVar[str] = "local"

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> LocalHop:
        no_options(cls.kind, options)
        if value:
            raise TargetSyntaxError("", f"local takes no value (got local={value})")
        return cls()

    def spec(self) -> str:
        return "local"

    def wrap(self, inner: Sequence[str]) -> list[str]:
        return list(inner)

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """Nothing between here and the far side can fail."""
        return None
