"""``incus=[REMOTE:]NAME[,project=P][,user=UID]``: an Incus instance, ``incus exec NAME --mode=non-interactive
--``.

``--mode=non-interactive`` keeps Incus from allocating a terminal even when it guesses otherwise; stdin and
stdout stay a plain byte channel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote.hops.base import explain_by_table, missing_program, need_value, no_options
from trainprobe.remote.hops.docker import check_name
from trainprobe.remote.hops.records import HopFailure

FAILURES = (
    ("instance is not running", "instance {name} is not running", "start it: incus start {name}"),
    ("not found", "there is no instance {name}", "list the instances: incus list"),
)


@dataclass(frozen=True)
class IncusHop:
    kind: ClassVar[str] = "incus"
    name: str
    project: str | None = None
    user: int | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> IncusHop:
        no_options(cls.kind, options, ("project", "user"))
        name = check_name(cls.kind, need_value(cls.kind, value, "incus=trainer"), "instance name")
        project = options.get("project") or None
        if project is not None:
            check_name(cls.kind, project, "project")
        user_text = options.get("user") or None
        if user_text is not None and not user_text.isdigit():
            raise TargetSyntaxError(
                "", f"incus={name}: user= is a numeric uid for incus exec, got {user_text!r}"
            )
        return cls(name=name, project=project, user=int(user_text) if user_text else None)

    def spec(self) -> str:
        options = "".join(
            f",{k}={v}" for k, v in (("project", self.project), ("user", self.user)) if v is not None
        )
        return f"incus={self.name}{options}"

    def wrap(self, inner: Sequence[str]) -> list[str]:
        project = ["--project", self.project] if self.project else []
        user = ["--user", str(self.user)] if self.user is not None else []
        return ["incus", *project, "exec", self.name, "--mode=non-interactive", *user, "--", *inner]

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """``incus``'s words for this hop failing (see FAILURES), or ``incus`` not installed."""
        values = {"name": self.name}
        return missing_program(transport_log, "incus", "where this hop runs") or explain_by_table(
            transport_log, FAILURES, values
        )
