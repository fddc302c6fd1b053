"""``ssh=[user@]host[:port]``: the system OpenSSH client, so ``~/.ssh/config``, agents and keys just work.

The remote command is one string that the remote login shell splits; every word is single-quoted and checked
against the safe alphabet (:mod:`trainprobe.remote.shell`). Adjacent ssh hops (``ssh=a//ssh=b``) become one
``ssh -J a b``: OpenSSH's ProxyJump, never a command line quoted inside another.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from trainprobe.errors import AuthenticationError, TargetSyntaxError, UnreachableError
from trainprobe.remote import shell
from trainprobe.remote._record import field, record
from trainprobe.remote.hops.base import line_with, need_value, no_options
from trainprobe.remote.hops.records import EXIT_CONNECTION, HopFailure

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import ClassVar

#: how long an idle ControlMaster stays up for the next call to the same host (seconds)
CONTROL_PERSIST_S = 300

#: what ssh says when it cannot connect (each quoted as ssh wrote it, host and port included)
UNREACHABLE = (
    "could not resolve", "connection refused", "no route to host", "timed out", "network is unreachable",
    "connection closed", "kex_exchange", "connection reset", "broken pipe", "host is down",
)  # fmt: skip


@record(frozen=True)
class SshHop:
    kind: ClassVar[str] = "ssh"
    host: str
    user: str | None = None
    port: int | None = None
    # Not part of the target string: how the engine wants this connection made.
    jumps: tuple[SshHop, ...] = field(default=(), compare=False)
    connect_timeout: float | None = field(default=None, compare=False)
    control_dir: str | None = field(default=None, compare=False)
    config_file: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> SshHop:
        no_options(cls.kind, options)
        text = need_value(cls.kind, value, "ssh=root@10.1.2.6 or ssh=gpu-box:2222")
        user, at, hostport = text.rpartition("@")
        if at and not user:
            raise TargetSyntaxError("", f"ssh={text}: empty user before '@'")
        port: int | None = None
        if hostport.startswith("["):  # [ipv6]:port
            host, bracket, rest = hostport[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise TargetSyntaxError("", f"ssh={text}: write an IPv6 address as [addr] or [addr]:port")
            port_text = rest[1:] if rest else ""
        else:
            host, _, port_text = hostport.partition(":")
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise TargetSyntaxError("", f"ssh={text}: port {port_text!r} is not a number from 1 to 65535")
            port = int(port_text)
        if not host or host.startswith("-") or any(ch in host for ch in " /,"):
            raise TargetSyntaxError("", f"ssh={text}: {host!r} is not a host name or address")
        shell.check_word(host, "ssh host")
        if user:
            shell.check_word(user, "ssh user")
        return cls(host=host, user=user or None, port=port)

    @property
    def destination(self) -> str:
        """``[user@]host[:port]`` as ``-J`` takes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{host}{port}"

    def spec(self) -> str:
        return f"ssh={self.destination}"

    def options(self) -> list[str]:
        """The ssh options before the destination (pure; tests compare it to lists)."""
        argv = ["-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
        if self.config_file:
            argv += ["-F", self.config_file]
        if self.connect_timeout:
            argv += ["-o", f"ConnectTimeout={max(1, math.ceil(self.connect_timeout))}"]
        if self.control_dir:
            # auto: use a live master, else become one; a stale socket (master gone) is unlinked by ssh
            # itself.
            argv += [
                "-o", "ControlMaster=auto",
                "-o", f"ControlPath={self.control_dir}/%C",
                "-o", f"ControlPersist={CONTROL_PERSIST_S}",
            ]  # fmt: skip
        if self.jumps:
            argv += ["-J", ",".join(jump.destination for jump in self.jumps)]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.user:
            argv += ["-l", self.user]
        return argv

    def wrap(self, inner: Sequence[str]) -> list[str]:
        for word in inner:
            if shell.unsafe_characters(word):
                raise TargetSyntaxError(
                    "",
                    f"cannot pass {word[:60]!r} through ssh={self.destination}: "
                    "it holds characters a login shell would interpret",
                    hint="put ssh hops next to each other (they become ProxyJump); keep names plain",
                )
        return ["ssh", *self.options(), "--", self.host, shell.join(inner)]

    @staticmethod
    def control_check(argv: Sequence[str]) -> list[str] | None:
        """``ssh -O check`` for the ControlMaster that the run's ``argv`` (this hop's :meth:`wrap`, outermost)
        uses: it answers 0 when ssh is logged in to the host. None when the run uses no ControlMaster."""
        if not argv or argv[0] != "ssh" or "--" not in argv:
            return None
        end = list(argv).index("--")
        options = [word for word in argv[1:end] if word != "-T"]
        if not any(word.startswith("ControlPath=") for word in options):
            return None
        return ["ssh", *options, "-O", "check", "--", argv[end + 1]]

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """ssh's own failures, and an account without a login shell. ssh's words count only when it exited
        255: any other status is the remote command's, and ssh's words in the log (a stale ControlMaster
        socket it replaced) did not stop the run."""
        if line := line_with(transport_log, ("this account is currently not available",)):
            return HopFailure(
                AuthenticationError,
                f"{self.user or 'the user'} has no login shell there (nologin): {line}",
                "connect as a user whose login shell runs commands",
            )
        if returncode != EXIT_CONNECTION:
            return None
        if line := line_with(transport_log, ("host key verification failed", "host identification has")):
            return HopFailure(
                AuthenticationError,
                f"host key verification failed: {line}",
                f"if {self.host} was reinstalled: ssh-keygen -R {self.host}; else check ~/.ssh/known_hosts",
            )
        if line := line_with(transport_log, ("permission denied (", "too many authentication failures")):
            return HopFailure(
                AuthenticationError,
                f"authentication refused: {line}",
                "check the user, keys (ssh-add -l) and ~/.ssh/config",
            )
        if line := line_with(transport_log, UNREACHABLE):
            return HopFailure(
                UnreachableError, f"unreachable: {line}", "check the host name, port and network"
            )
        return None
