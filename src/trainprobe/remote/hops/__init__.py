"""The hop kinds a target string may use: one line per kind in :data:`HOP_KINDS`.

To add a kind, write ``hops/<kind>.py`` with a class following
:class:`~trainprobe.remote.hops.protocols.WrappingHop` (``wrap`` and ``explain_failure``) or
:class:`~trainprobe.remote.hops.protocols.SettingHop` (``apply``) and add one line ``"kind": "module:Class"``
below.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

TYPE_CHECKING = False  # see hops/protocols.py: no typing on a run's path
if TYPE_CHECKING:
    from trainprobe.remote.hops.protocols import Hop

#: kind -> "module:Class", imported on first use: a target names two or three kinds, and importing
#: all of them would cost every run's start-up
_HOP_CLASSES: dict[str, str] = {
    # wrapping hops, outermost first in a target
    "local": "trainprobe.remote.hops.local:LocalHop",
    "ssh": "trainprobe.remote.hops.ssh:SshHop",
    "sudo": "trainprobe.remote.hops.sudo:SudoHop",
    "pct": "trainprobe.remote.hops.pct:PctHop",
    "docker": "trainprobe.remote.hops.docker:DockerHop",
    "podman": "trainprobe.remote.hops.podman:PodmanHop",
    "kubectl": "trainprobe.remote.hops.kubectl:KubectlHop",
    "lxc": "trainprobe.remote.hops.lxc:LxcHop",
    "incus": "trainprobe.remote.hops.incus:IncusHop",
    "slurm": "trainprobe.remote.hops.slurm:SlurmHop",
    # setting hops, after the last wrapping hop
    "python": "trainprobe.remote.hops.settings:PythonHop",
    "venv": "trainprobe.remote.hops.settings:VenvHop",
    "conda": "trainprobe.remote.hops.settings:CondaHop",
    "cd": "trainprobe.remote.hops.settings:CdHop",
    "env": "trainprobe.remote.hops.settings:EnvHop",
}


class _HopKinds(Mapping[str, "type[Hop]"]):
    """Read-only ``kind -> class`` mapping over :data:`_HOP_CLASSES`; imports a class when first asked."""

    def __getitem__(self, kind: str) -> type[Hop]:
        module, _, name = _HOP_CLASSES[kind].partition(":")
        cls: type[Hop] = getattr(importlib.import_module(module), name)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(_HOP_CLASSES)

    def __len__(self) -> int:
        return len(_HOP_CLASSES)


HOP_KINDS: Mapping[str, type[Hop]] = _HopKinds()


__all__ = ["HOP_KINDS"]
