"""The ``probe`` tool: what a machine has (``trainprobe.remote.probe.probe`` / ``probe_fleet``)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import FleetDocument
from trainprobe.mcp.parameters import Target, Timeout
from trainprobe.mcp.summary import Summary, fleet, short
from trainprobe.mcp.targets import LOCAL, place_of, presented, targets_of

_GIB = 2**30


class ProbeDocument(FleetDocument, total=False):
    """`trainprobe probe --json`: what one machine has; for a fleet, the fleet's document."""

    target: str | None
    host: str | None
    user: str | None
    agent_python: str | None
    interpreters: list[Any]
    gpus: list[Any] | None
    disks: list[Any]
    load: list[Any]
    cpus: int | None
    memory: dict[str, Any]
    processes: list[Any]


def probe(
    target: Target = LOCAL,
    cuda: Annotated[
        bool, Field(description="Import torch in each interpreter to ask about CUDA (slower).")
    ] = True,
    timeout_s: Timeout = 300,
) -> Annotated[CallToolResult, ProbeDocument]:
    """What is on a machine: Python interpreters in discovery order (versions; numpy, torch, CUDA), GPUs
    (nvidia-smi), free disk, load, memory, and running Python processes (training ones flagged). Use it first
    on an unknown target to pick the interpreter (then name it in `run`'s target: `//venv=...`)."""
    return answer(TOOL, lambda: document(target, cuda=cuda, timeout=timeout_s), target=target)


def document(target: str, *, cuda: bool, timeout: float) -> dict[str, Any]:
    """``probe --json``: one target's report, or for a fleet the fleet document (each result a report)."""
    from trainprobe.remote.fanout import needs_fleet
    from trainprobe.remote.probe import probe as probe_one
    from trainprobe.remote.probe import probe_fleet
    from trainprobe.remote.session import CONNECT_TIMEOUT_S

    targets = targets_of(target)
    if needs_fleet(targets):
        fleet = probe_fleet(
            [str(t) for t in targets], cuda=cuda, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S
        )
        return fleet.to_json()
    where = place_of(targets[0])
    with presented(where):
        return probe_one(where.engine, cuda=cuda, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S)


def _interpreter(i: dict[str, Any]) -> str:
    cuda = f", cuda {i.get('cuda')} ({i.get('cuda_devices')})" if "cuda" in i else ""
    found = f"numpy {i.get('numpy') or '—'}, torch {i.get('torch') or '—'}"
    return f"- {i.get('python')} {i.get('version') or i.get('error')}: {found}{cuda}"


def _gpu(g: dict[str, Any]) -> str:
    memory = f"{g.get('memory_used_mib')}/{g.get('memory_total_mib')} MiB"
    return f"- GPU {g.get('index')} {g.get('name')}: {memory}, {g.get('utilization_pct')} % busy"


def _disk(d: dict[str, Any]) -> str:
    free, total = d.get("free_bytes", 0) / _GIB, d.get("total_bytes", 0) / _GIB
    return f"- disk {d.get('path')}: {free:.1f} GiB free of {total:.1f} GiB"


def _process(p: dict[str, Any]) -> str:
    return f"- pid {p.get('pid')}{' TRAINING' if p.get('training') else ''}: {short(p.get('cmdline'), 200)}"


def summarise(doc: dict[str, Any]) -> Summary:
    if "targets" in doc:
        return fleet(doc, "probe")
    s = Summary()
    memory = doc.get("memory") or {}
    s.add(
        f"probe {doc.get('target')}: host {doc.get('host')}, user {doc.get('user')}, {doc.get('cpus')} "
        f"CPU(s), load {' '.join(str(x) for x in doc.get('load') or [])}, memory "
        f"{memory.get('memavailable_bytes', 0) / _GIB:.1f} GiB free of "
        f"{memory.get('memtotal_bytes', 0) / _GIB:.1f} GiB"
    )
    interpreters = doc.get("interpreters") or []
    s.add(f"{len(interpreters)} Python interpreter(s), in discovery order:")
    s.listed(interpreters, _interpreter, limit=10, what="interpreters")
    gpus = doc.get("gpus")
    if gpus is None:
        s.add("GPUs: no nvidia-smi")
    else:
        s.listed(gpus, _gpu, limit=16, what="GPUs")
    s.listed(doc.get("disks") or [], _disk, limit=5, what="disks")
    processes = sorted(doc.get("processes") or [], key=lambda p: not p.get("training"))
    s.add(f"{len(processes)} running Python process(es)" + (":" if processes else ""))
    s.listed(processes, _process, limit=10, what="processes")
    return s


TOOL = Tool(probe, summarise, brief="what a machine has", fleet=True)
