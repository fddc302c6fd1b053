"""The hop kinds a target string may use: one row per kind in :data:`_KIND_ROWS`.

To add a kind, write ``hops/<kind>.py`` with a class following
:class:`~trainprobe.remote.hops.protocols.WrappingHop` (``wrap`` and ``explain_failure``) or
:class:`~trainprobe.remote.hops.protocols.SettingHop` (``apply``) and add its row below: ``"kind":
("module:Class", usage, meaning)``. The usage and meaning are the kind's line in every target help
(``trainprobe run --help``'s, the MCP tools' descriptions: :func:`kinds_help`), read without importing any
hop module.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

TYPE_CHECKING = False  # see hops/protocols.py: no typing on a run's path
if TYPE_CHECKING:
    from trainprobe.remote.hops.protocols import Hop

#: kind -> ("module:Class" under trainprobe.remote.hops, usage, meaning); the class is imported on first use:
#: a target names two or three kinds, and importing all of them would cost every run's start-up
_KIND_ROWS: dict[str, tuple[str, str, str]] = {
    # wrapping hops, outermost first in a target
    "local": ("local:LocalHop", "local", "this machine"),
    "ssh": ("ssh:SshHop", "ssh=user@host:port", "OpenSSH, user@ and :port optional (~/.ssh/config applies)"),
    "sudo": ("sudo:SudoHop", "sudo[=USER]", "non-interactive sudo (sudo -n)"),
    "pct": ("pct:PctHop", "pct=ID", "a Proxmox container (pct exec on its host)"),
    "docker": ("docker:DockerHop", "docker=NAME", "a running Docker container (docker=NAME,user=1000)"),
    "podman": ("podman:PodmanHop", "podman=NAME", "a running Podman container (podman=NAME,user=1000)"),
    "kubectl": ("kubectl:KubectlHop", "kubectl=POD,namespace=N", "a Kubernetes pod (kubectl exec)"),
    "lxc": ("lxc:LxcHop", "lxc=NAME", "an LXC container (lxc-attach)"),
    "incus": ("incus:IncusHop", "incus=NAME", "an Incus instance (incus exec)"),
    "slurm": ("slurm:SlurmHop", "slurm=JOBID[@NODE]", "a running Slurm job's node (srun --overlap)"),
    # setting hops, after the last wrapping hop
    "python": ("settings:PythonHop", "python=PATH", "the interpreter (default: discovered on the far side)"),
    "venv": ("settings:VenvHop", "venv=DIR", "the interpreter of a virtual environment (venv=~/venv)"),
    "conda": ("settings:CondaHop", "conda=ENV", "the interpreter of a conda environment"),
    "cd": ("settings:CdHop", "cd=DIR", "the script's working directory (~ and $HOME: the far side's home)"),
    "env": ("settings:EnvHop", "env=NAME=VALUE", "a variable of the script's environment"),
}


def kinds_help() -> list[tuple[str, str]]:
    """(usage, meaning) of every kind, in the order a target writes them."""
    return [(usage, meaning) for _, usage, meaning in _KIND_ROWS.values()]


class _HopKinds(Mapping[str, "type[Hop]"]):
    """Read-only ``kind -> class`` mapping over :data:`_KIND_ROWS`; imports a class when first asked."""

    def __getitem__(self, kind: str) -> type[Hop]:
        module, _, name = _KIND_ROWS[kind][0].partition(":")
        cls: type[Hop] = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(_KIND_ROWS)

    def __len__(self) -> int:
        return len(_KIND_ROWS)


HOP_KINDS: Mapping[str, type[Hop]] = _HopKinds()


__all__ = ["HOP_KINDS", "kinds_help"]
