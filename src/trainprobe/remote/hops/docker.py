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

from trainprobe.remote.hops.base import EnteringHop, flag, name_option, path_option, spec_with


@dataclass(frozen=True)
class DockerHop(EnteringHop, kind="docker", program="docker"):
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
        name = cls.parse_name(value, options, ("user", "socket"), f"{cls.kind}=trainer", "container name")
        user = name_option(cls.kind, options, "user")
        socket = path_option(cls.kind, name, options, "socket", "socket path")
        return cls(container=name, user=user, socket=socket)

    def spec(self) -> str:
        return spec_with(f"{self.kind}={self.container}", (("user", self.user), ("socket", self.socket)))

    def wrap(self, inner: Sequence[str]) -> list[str]:
        daemon = flag(self.host_flag, self.socket and f"unix://{self.socket}")
        return [self.program, *daemon, "exec", "-i", *flag("--user", self.user), self.container, *inner]

    def failure_values(self) -> Mapping[str, object]:
        """For the client's words for a stopped, paused or missing container or an unreachable daemon."""
        return {"name": self.container, "kind": self.kind}
