"""``sudo[=USER]``: run the rest as USER (default root), never prompting (``sudo -n``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainprobe.errors import AuthenticationError
from trainprobe.remote import shell
from trainprobe.remote._record import record
from trainprobe.remote.hops.base import line_with, missing_program, no_options
from trainprobe.remote.hops.records import HopFailure

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import ClassVar


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

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """sudo's own refusals (``sudo: ...`` lines), each quoted as sudo wrote it."""
        user = self.user or "root"
        if line_with(
            transport_log, ("sudo: a password is required", "sudo: a terminal is required", "no tty")
        ):
            return HopFailure(
                AuthenticationError,
                "sudo refused: a password is required (trainprobe runs sudo -n, which never prompts)",
                "allow this user NOPASSWD in sudoers, or connect as the target user",
            )
        if line := line_with(transport_log, ("sudo: unknown user",)):
            return HopFailure(AuthenticationError, f"sudo: there is no user {user} there ({line})",
                              "check the name after sudo=")  # fmt: skip
        if line := line_with(transport_log, ("is not in the sudoers file", "is not allowed to run sudo",
                                             "sorry, user")):  # fmt: skip
            return HopFailure(AuthenticationError, f"sudo refused: {line}",
                              f"allow this user to run commands as {user} in sudoers")  # fmt: skip
        return missing_program(transport_log, "sudo", "on the far side")
