"""``pct=VMID``: a Proxmox container, entered as ``pct exec VMID -- ...`` on the Proxmox host.

Proxmox's ``pct exec`` checks that the container runs and then execs ``lxc-attach -n VMID -- ...``; stdin and
stdout pass straight through, so the framed channel works unchanged. Interpreter discovery runs inside the CT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote.hops.base import EnteringHop, need_value, no_options


@dataclass(frozen=True)
class PctHop(EnteringHop, kind="pct", program="pct"):
    failures = (
        ("not running", "CT {vmid} is not running", "start it: pct start {vmid}"),
        ("does not exist", "there is no CT {vmid} on this node", "list the containers: pct list"),
    )
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

    def failure_values(self) -> Mapping[str, object]:
        return {"vmid": self.vmid}
