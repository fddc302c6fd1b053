"""``podman=CONTAINER[,user=U][,socket=PATH]``: ``podman exec -i``; Docker's hop with another program.

``socket=`` makes podman a remote client of ``podman system service`` on that socket (``--url``).
"""

from __future__ import annotations

from trainprobe.remote.hops.docker import DockerHop


class PodmanHop(DockerHop, kind="podman", program="podman"):
    host_flag = "--url"
    failures = (
        ("container state improper", "container {name} is not running", "start it: podman start {name}"),
        ("no container with name or id", "no container named {name}", "list the containers: podman ps -a"),
        *DockerHop.failures,
    )
