"""Short text summaries of the remote engine's documents: ``probe`` and ``run``, for one target or a fleet
(the framework, :class:`~trainprobe.mcp.summary.Summary`, and the library documents' summaries are in
:mod:`trainprobe.mcp.summary`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainprobe.mcp.summary import Summary, counts_text, short

RUN_OUTPUT_CHARS = 3000  # of the script's stdout shown by `run`; stderr gets half
_GIB = 2**30


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


def _outcome(o: dict[str, Any]) -> str:
    return (
        f"- {o.get('target')}: {o.get('status')}, exit {o.get('exit_code')}: {short(o.get('summary'), 200)}"
    )


def probe(doc: dict[str, Any]) -> Summary:
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


def fleet(doc: dict[str, Any], tool: str) -> Summary:
    s = Summary()
    counts = dict(doc.get("counts") or {})
    total = counts.pop("total", len(doc.get("targets") or []))
    s.add(
        f"{tool} on {total} target(s): {counts_text(counts)} (exit code {doc.get('exit_code')}); logs: "
        f"{doc.get('log_dir')}"
    )
    s.listed(doc.get("targets") or [], _outcome, limit=20, what="targets")
    return s


def run(doc: dict[str, Any]) -> Summary:
    if "targets" in doc:
        return fleet(doc, "run")
    s = Summary()
    s.add(
        f"run on {doc.get('target')}: exit code {doc.get('exit_code')} in {doc.get('duration')} s, python "
        f"{doc.get('python')} on {doc.get('host')}"
    )
    if doc.get("result") is not None:
        shown = json.dumps(doc["result"], default=str)
        cut = f" … ({len(shown) - 1000:,} more characters in the full report)" if len(shown) > 1000 else ""
        s.add(f"main() returned: {shown[:1000]}{cut}")
    for stream, limit in (("stdout", RUN_OUTPUT_CHARS), ("stderr", RUN_OUTPUT_CHARS // 2)):
        s.lines.extend(_output_tail(stream, doc.get(f"{stream}_log"), limit))
    return s


def _output_tail(stream: str, path: str | None, limit: int) -> list[str]:
    """The end of a run's stdout or stderr, saying how many bytes before it were left out and where."""
    if not path:
        return []
    try:
        data = Path(path).read_bytes()
    except OSError:
        return [f"{stream}: not kept ({path} cannot be read)"]
    if not data:
        return [f"{stream}: (empty)"]
    shown = data[-limit:]
    if len(shown) < len(data):
        cut = shown.find(b"\n")
        shown = shown[cut + 1 :] if 0 <= cut < len(shown) - 1 else shown
    head = f"{stream} ({len(data):,} bytes"
    head += (
        f"; the first {len(data) - len(shown):,} left out, all of it in {path})"
        if len(shown) < len(data)
        else ")"
    )
    return [head + ":", shown.decode("utf-8", "replace").rstrip("\n")]
