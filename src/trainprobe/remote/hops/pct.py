"""``pct=VMID``: a Proxmox container, entered as ``pct exec VMID -- ...`` on the Proxmox host.

Proxmox's ``pct exec`` checks that the container runs and then execs ``lxc-attach -n VMID -- ...``; stdin and
stdout pass straight through, so the framed channel works unchanged. Interpreter discovery runs inside the CT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote.hops.base import explain_by_table, missing_program, need_value, no_options
from trainprobe.remote.hops.records import HopFailure

FAILURES = (
    ("not running", "CT {vmid} is not running", "start it: pct start {vmid}"),
    ("does not exist", "there is no CT {vmid} on this node", "list the containers: pct list"),
)


@dataclass(frozen=True)
class PctHop:
    kind: ClassVar[str] = "pct"
    vmid: int

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> PctHop:
        no_options(cls.kind, options)
        text = need_value(cls.kind, value, "pct=200")
        if not text.isdigit() or not 100 <= int(text) <= 999_999_999:
            raise TargetSyntaxError("", f"pct={text}: a Proxmox VMID is a number from 100 to 999999999")
        return cls(vmid=int(text))

    def spec(self) -> str:
        return f"pct={self.vmid}"

    def wrap(self, inner: Sequence[str]) -> list[str]:
        return ["pct", "exec", str(self.vmid), "--", *inner]

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """``pct``'s words for this hop failing (see FAILURES), or ``pct`` not installed."""
        values = {"vmid": self.vmid}
        return missing_program(transport_log, "pct", "where this hop runs") or explain_by_table(
            transport_log, FAILURES, values
        )
