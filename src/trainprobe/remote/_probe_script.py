"""The script ``trainprobe probe`` runs on the far side (standard library only; Python 3.7+).

``main()`` returns what is there: interpreters (discovery order, with versions and torch/numpy/CUDA), GPUs
from ``nvidia-smi``, disk free, load and memory, and running Python processes (trainprobe's own left out;
those that look like training flagged).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

TRAINING_WORDS = (
    "train", "torchrun", "torch.distributed", "deepspeed", "accelerate", "lightning", "finetune", "megatron",
)  # fmt: skip

INSPECT = """
import json, sys, importlib.util as u
info = {"version": sys.version.split()[0], "prefix": sys.prefix}
for name in ("numpy", "torch"):
    found = u.find_spec(name) is not None
    info[name] = None
    if found:
        try:
            from importlib.metadata import version
            info[name] = version(name)
        except Exception:
            info[name] = "?"
if info["torch"] and "--cuda" in sys.argv:
    try:
        import torch
        info["cuda"] = bool(torch.cuda.is_available())
        info["cuda_devices"] = torch.cuda.device_count() if info["cuda"] else 0
    except Exception as exc:
        info["cuda"] = None
        info["torch_error"] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(info))
"""


def inspect_python(path: str, cuda: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"python": path}
    try:
        proc = subprocess.run([path, "-c", INSPECT, *(["--cuda"] if cuda else [])], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=120)  # fmt: skip
        entry.update(json.loads(proc.stdout.decode().strip().splitlines()[-1]))
    except Exception as exc:
        entry["error"] = type(exc).__name__ + ": " + str(exc)
    return entry


def gpus() -> list[dict[str, Any]] | None:
    if not shutil.which("nvidia-smi"):
        return None
    fields = "index,name,memory.used,memory.total,utilization.gpu"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits"],
                             capture_output=True, timeout=30).stdout.decode()  # fmt: skip
    except Exception:
        return []
    found = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5:
            found.append({"index": parts[0], "name": parts[1], "memory_used_mib": parts[2],
                          "memory_total_mib": parts[3], "utilization_pct": parts[4]})  # fmt: skip
    return found


def disks() -> list[dict[str, Any]]:
    seen = set()
    found = []
    for path in (os.path.expanduser("~"), os.getcwd(), "/", "/tmp"):
        try:
            usage = shutil.disk_usage(path)
            dev = os.stat(path).st_dev
        except OSError:
            continue
        if dev in seen:
            continue
        seen.add(dev)
        found.append({"path": path, "free_bytes": usage.free, "total_bytes": usage.total})
    return found


def memory() -> dict[str, int]:
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    info[key.lower() + "_bytes"] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return info


def ancestors() -> set[int]:
    pids = set()
    pid = os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def is_trainprobe_own(argv: list[str], own_code: tuple[str, ...], boot: str) -> bool:
    """A process of trainprobe itself, this run's or another's: stage 1 and the agent (and the script
    process it forks) run ``python -c BOOT ...``; discovery's module check and this probe's interpreter
    inspection run ``python -c CODE`` with code from ``own_code``."""
    if len(argv) < 3 or argv[1] != "-c":
        return False
    code = argv[2]
    return boot in code or code in own_code


def python_processes(own_code: tuple[str, ...], boot: str) -> list[dict[str, Any]]:
    """Running Python processes but trainprobe's own (see :func:`is_trainprobe_own`)."""
    mine = ancestors()
    found = []
    for name in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        pid = int(name)
        if pid in mine:
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if not os.path.basename(exe).startswith("python") or is_trainprobe_own(argv, own_code, boot):
            continue
        cmdline = " ".join(argv)
        found.append({"pid": pid, "uid": uid, "python": exe, "cmdline": cmdline[:500],
                      "training": any(w in cmdline.lower() for w in TRAINING_WORDS)})  # fmt: skip
    return found


def main() -> dict[str, Any]:
    import trainprobe_discovery  # type: ignore[import-not-found]  # shipped from memory by remote.probe

    cuda = "--cuda" in sys.argv
    candidates = trainprobe_discovery.discovery_order()
    with ThreadPoolExecutor(max_workers=8) as pool:
        interpreters = list(pool.map(lambda p: inspect_python(p, cuda), candidates))
    return {
        "host": socket.gethostname(),
        "user": pwd.getpwuid(os.getuid()).pw_name,
        "agent_python": sys.executable,
        "interpreters": interpreters,
        "gpus": gpus(),
        "disks": disks(),
        "load": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "memory": memory(),
        "processes": python_processes(
            (INSPECT, trainprobe_discovery.NEED_CHECK), trainprobe_discovery.OUR_BOOT.decode()
        ),
    }
