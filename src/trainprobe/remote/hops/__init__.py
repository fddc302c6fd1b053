"""The hop kinds a target string may use: one line per kind in :data:`HOP_KINDS`.

To add a kind, write ``hops/<kind>.py`` with a class following
:class:`~trainprobe.remote.hops.base.WrappingHop`
(or :class:`~trainprobe.remote.hops.base.SettingHop`) and add one line below.
"""

from __future__ import annotations

from trainprobe.remote.hops.base import FarSettings, Hop, SettingHop, WrappingHop
from trainprobe.remote.hops.docker import DockerHop
from trainprobe.remote.hops.incus import IncusHop
from trainprobe.remote.hops.kubectl import KubectlHop
from trainprobe.remote.hops.local import LocalHop
from trainprobe.remote.hops.lxc import LxcHop
from trainprobe.remote.hops.pct import PctHop
from trainprobe.remote.hops.podman import PodmanHop
from trainprobe.remote.hops.settings import CdHop, CondaHop, EnvHop, PythonHop, VenvHop
from trainprobe.remote.hops.slurm import SlurmHop
from trainprobe.remote.hops.ssh import SshHop
from trainprobe.remote.hops.sudo import SudoHop

HOP_KINDS: dict[str, type[Hop]] = {
    # wrapping hops, outermost first in a target
    "local": LocalHop,
    "ssh": SshHop,
    "sudo": SudoHop,
    "pct": PctHop,
    "docker": DockerHop,
    "podman": PodmanHop,
    "kubectl": KubectlHop,
    "lxc": LxcHop,
    "incus": IncusHop,
    "slurm": SlurmHop,
    # setting hops, after the last wrapping hop
    "python": PythonHop,
    "venv": VenvHop,
    "conda": CondaHop,
    "cd": CdHop,
    "env": EnvHop,
}

__all__ = ["HOP_KINDS", "FarSettings", "Hop", "SettingHop", "WrappingHop"]
