"""``probe``: what is on a target — interpreters, GPUs, disk, load, running training processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainprobe.remote.api import run
from trainprobe.remote.session import Module
from trainprobe.remote.target import Target

_HERE = Path(__file__).resolve().parent


def probe(
    target: str | Target, *, cuda: bool = True, timeout: float | None = 300.0, connect_timeout: float = 10.0
) -> dict[str, Any]:
    """Look around on ``target``; returns the JSON document ``trainprobe probe --json`` prints.

    Keys: ``target``, ``host``, ``user``, ``agent_python``, ``interpreters`` (each ``python``, ``version``,
    ``prefix``, ``numpy``/``torch`` versions or null, ``cuda`` and ``cuda_devices`` when torch is there and
    ``cuda`` is asked for), ``gpus`` (null without nvidia-smi), ``disks``, ``load``, ``cpus``, ``memory``,
    ``processes`` (running Pythons: ``pid``, ``uid``, ``python``, ``cmdline``, ``training``), ``log_dir``.
    Raises the run's RemoteError.
    """
    stage1 = _HERE / "_stage1.py"
    script = _HERE / "_probe_script.py"
    outcome = run(
        target,
        script,
        ["--cuda"] if cuda else [],
        timeout=timeout,
        connect_timeout=connect_timeout,
        modules=[Module("trainprobe_stage1", str(stage1), stage1.read_bytes())],
    ).raise_for_error()
    report: dict[str, Any] = {"target": outcome.target, **(outcome.result or {})}
    report["log_dir"] = str(outcome.log_dir)
    return report
