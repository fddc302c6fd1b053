"""``incus=[REMOTE:]NAME[,project=P][,user=UID]``: an Incus instance, ``incus exec NAME --mode=non-interactive
--``.

``--mode=non-interactive`` keeps Incus from allocating a terminal even when it guesses otherwise; stdin and
stdout stay a plain byte channel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote.hops.base import EnteringHop, flag, name_option, spec_with


@dataclass(frozen=True)
class IncusHop(EnteringHop, kind="incus", program="incus"):
    failures = (
        ("instance is not running", "instance {name} is not running", "start it: incus start {name}"),
        ("not found", "there is no instance {name}", "list the instances: incus list"),
    )
    name: str
    project: str | None = None
    user: int | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> IncusHop:
        name = cls.parse_name(value, options, ("project", "user"), "incus=trainer", "instance name")
        project = name_option(cls.kind, options, "project")
        user_text = options.get("user") or None
        if user_text is not None and not user_text.isdigit():
            raise TargetSyntaxError(
                "", f"incus={name}: user= is a numeric uid for incus exec, got {user_text!r}"
            )
        return cls(name=name, project=project, user=int(user_text) if user_text else None)

    def spec(self) -> str:
        return spec_with(f"incus={self.name}", (("project", self.project), ("user", self.user)))

    def wrap(self, inner: Sequence[str]) -> list[str]:
        project, user = flag("--project", self.project), flag("--user", self.user)
        return ["incus", *project, "exec", self.name, "--mode=non-interactive", *user, "--", *inner]

    def failure_values(self) -> Mapping[str, object]:
        return {"name": self.name}
