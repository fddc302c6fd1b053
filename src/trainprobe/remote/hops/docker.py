"""``docker=CONTAINER[,user=U][,socket=PATH]``: ``docker exec -i`` into a running container (never ``-t``).

``user=`` runs as that user (``name``, ``uid`` or ``uid:gid``); ``socket=`` talks to the daemon on that Unix
socket (rootless Docker, a second daemon) instead of the default one or ``$DOCKER_HOST``. Interpreter
discovery then runs again inside the container. :class:`~trainprobe.remote.hops.podman.PodmanHop` is this
class with another program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote import shell
from trainprobe.remote.hops.base import explain_by_table, missing_program, need_value, no_options
from trainprobe.remote.hops.records import HopFailure


def check_name(kind: str, value: str, what: str) -> str:
    """A container, pod or job name: safe alphabet, no leading ``-`` (it would read as an option)."""
    shell.check_word(value, what)
    if value.startswith("-") or " " in value:
        raise TargetSyntaxError("", f"{kind}={value}: {what} may not start with '-' or contain spaces")
    return value


@dataclass(frozen=True)
class DockerHop:
    kind: ClassVar[str] = "docker"
    #: the flag that points the client at another daemon socket
    host_flag: ClassVar[str] = "--host"
    #: ``(text the client prints, why, what to try)``; ``{name}`` and ``{kind}`` are filled in
    failures: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("is not running", "container {name} is not running", "start it: {kind} start {name}"),
        ("no such container", "no container named {name}", "list the containers: {kind} ps -a"),
        ("is paused", "container {name} is paused", "resume it: {kind} unpause {name}"),
        ("cannot connect to the docker daemon", "the Docker daemon is not reachable", "is dockerd running?"),
        ("docker daemon socket", "no permission to use the Docker daemon", "add sudo// before this hop"),
    )

    container: str
    user: str | None = None
    socket: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> DockerHop:
        no_options(cls.kind, options, ("user", "socket"))
        name = check_name(cls.kind, need_value(cls.kind, value, f"{cls.kind}=trainer"), "container name")
        user = options.get("user") or None
        socket = options.get("socket") or None
        if user is not None:
            check_name(cls.kind, user, "user")
        if socket is not None:
            shell.check_word(socket, "socket path")
            if not socket.startswith("/"):
                raise TargetSyntaxError(
                    "", f"{cls.kind}={name}: socket= must be an absolute path, got {socket!r}"
                )
        return cls(container=name, user=user, socket=socket)

    def spec(self) -> str:
        options = "".join(f",{k}={v}" for k, v in (("user", self.user), ("socket", self.socket)) if v)
        return f"{self.kind}={self.container}{options}"

    def wrap(self, inner: Sequence[str]) -> list[str]:
        daemon = [self.host_flag, f"unix://{self.socket}"] if self.socket else []
        user = ["--user", self.user] if self.user else []
        return [self.kind, *daemon, "exec", "-i", *user, self.container, *inner]

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """The client's words for a stopped, paused or missing container or an unreachable daemon."""
        values = {"name": self.container, "kind": self.kind}
        return missing_program(transport_log, self.kind, "where this hop runs") or explain_by_table(
            transport_log, self.failures, values
        )
