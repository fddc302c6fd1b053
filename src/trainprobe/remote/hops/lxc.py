"""``lxc=NAME[,lxcpath=DIR]``: an LXC container, entered with ``lxc-attach -n NAME -- ...``.

``lxcpath=`` is LXC's ``-P`` (containers kept somewhere other than ``/var/lib/lxc``). lxc-attach never
allocates a terminal when stdin is not one, so the framed channel passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote import shell
from trainprobe.remote.hops.base import explain_by_table, missing_program, need_value, no_options
from trainprobe.remote.hops.docker import check_name
from trainprobe.remote.hops.records import HopFailure

FAILURES = (
    # lxc-attach says the same for a stopped container and for one that does not exist
    ("failed to get init pid", "container {name} is not running (or does not exist)", "lxc-ls -f lists them"),
)


@dataclass(frozen=True)
class LxcHop:
    kind: ClassVar[str] = "lxc"
    name: str
    lxcpath: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> LxcHop:
        no_options(cls.kind, options, ("lxcpath",))
        name = check_name(cls.kind, need_value(cls.kind, value, "lxc=trainer"), "container name")
        lxcpath = options.get("lxcpath") or None
        if lxcpath is not None:
            shell.check_word(lxcpath, "lxcpath")
            if not lxcpath.startswith("/"):
                raise TargetSyntaxError("", f"lxc={name}: lxcpath= must be an absolute path, got {lxcpath!r}")
        return cls(name=name, lxcpath=lxcpath)

    def spec(self) -> str:
        return f"lxc={self.name}" + (f",lxcpath={self.lxcpath}" if self.lxcpath else "")

    def wrap(self, inner: Sequence[str]) -> list[str]:
        path = ["-P", self.lxcpath] if self.lxcpath else []
        return ["lxc-attach", *path, "-n", self.name, "--", *inner]

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """``lxc-attach``'s words for this hop failing (see FAILURES), or ``lxc-attach`` not installed."""
        values = {"name": self.name}
        return missing_program(transport_log, "lxc-attach", "where this hop runs") or explain_by_table(
            transport_log, FAILURES, values
        )
