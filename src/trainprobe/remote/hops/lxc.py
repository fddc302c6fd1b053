"""``lxc=NAME[,lxcpath=DIR]``: an LXC container, entered with ``lxc-attach -n NAME -- ...``.

``lxcpath=`` is LXC's ``-P`` (containers kept somewhere other than ``/var/lib/lxc``). lxc-attach never
allocates a terminal when stdin is not one, so the framed channel passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainprobe.remote.hops.base import EnteringHop, flag, path_option, spec_with


@dataclass(frozen=True)
class LxcHop(EnteringHop, kind="lxc", program="lxc-attach"):
    failures = (
        # lxc-attach says the same for a stopped container and for one that does not exist
        (
            "failed to get init pid",
            "container {name} is not running (or does not exist)",
            "lxc-ls -f lists them",
        ),
    )
    name: str
    lxcpath: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> LxcHop:
        name = cls.parse_name(value, options, ("lxcpath",), "lxc=trainer", "container name")
        return cls(name=name, lxcpath=path_option(cls.kind, name, options, "lxcpath", "lxcpath"))

    def spec(self) -> str:
        return spec_with(f"lxc={self.name}", (("lxcpath", self.lxcpath),))

    def wrap(self, inner: Sequence[str]) -> list[str]:
        return ["lxc-attach", *flag("-P", self.lxcpath), "-n", self.name, "--", *inner]

    def failure_values(self) -> Mapping[str, object]:
        return {"name": self.name}
