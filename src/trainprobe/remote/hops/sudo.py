"""``sudo[=USER]``: run the rest as USER (default root), never prompting (``sudo -n``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from trainprobe.remote import shell
from trainprobe.remote._record import record
from trainprobe.remote.hops.base import no_options


@record(frozen=True)
class SudoHop:
    kind: ClassVar[str] = "sudo"
    user: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> SudoHop:
        no_options(cls.kind, options)
        if value:
            shell.check_word(value, "sudo user")
        return cls(user=value or None)

    def spec(self) -> str:
        return f"sudo={self.user}" if self.user else "sudo"

    def wrap(self, inner: Sequence[str]) -> list[str]:
        # -n: fail at once instead of waiting for a password nobody can type; stdin stays ours.
        user = ["-u", self.user] if self.user else []
        return ["sudo", "-n", *user, "--", *inner]
