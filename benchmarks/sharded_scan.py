"""``scan --sharded``: N targets scanning their local shares of one checkpoint against one target scanning all
of it, in one run, over the same storage.

Writes a Hugging Face sharded checkpoint (``model.safetensors.index.json`` + N float32 shards, numpy only),
places shard k in ``node<k>/`` (the index on node 0) and every file in ``all/``, warms the page cache, then
runs :func:`trainprobe.tasks.scan_sharded` alternately (``--repeat`` times, medians) on

  (a) one target: ``local//cd=all``           -- one machine reads everything
  (b) N targets:  ``local//cd=node<k>``        -- each reads its own shard, where it is

Each target is a real far-side run (a fresh interpreter, trainprobe shipped over stdin, numpy only). Prints
wall time of each, the ratio (a)/(b), each target's bytes/s for its share, and a check that the two reports
are equal. On a 2-core machine the N targets share the same two cores and memory bandwidth, so the ratio
measures the engine's overhead and what parallelism the cores allow, not what N machines would give; the
per-target rate of (a) is what one node scans alone (the figure to scale from).

    .venv/bin/python benchmarks/sharded_scan.py [--targets 4] [--size-gb 1.0] [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

NAME = "model"


def write_sharded(folder: Path, shards: int, size_gb: float) -> int:
    """``shards`` safetensors files of float32 tensors (64 MiB each) and their index; returns total bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    per_shard = int(size_gb * 1e9 / shards)
    tensor_elems = 16 << 20  # 64 MiB of float32
    rng = np.random.default_rng(0)
    weight_map: dict[str, str] = {}
    total = 0
    for k in range(shards):
        shard = f"{NAME}-{k + 1:05d}-of-{shards:05d}.safetensors"
        count = max(1, per_shard // (tensor_elems * 4))
        header: dict[str, Any] = {}
        offset = 0
        for i in range(count):
            name = f"layers.{k}.{i}.weight"
            header[name] = {
                "dtype": "F32",
                "shape": [tensor_elems],
                "data_offsets": [offset, offset + 4 * tensor_elems],
            }
            offset += 4 * tensor_elems
            weight_map[name] = shard
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(folder / shard, "wb") as fh:
            fh.write(struct.pack("<Q", len(text)) + text)
            for _ in range(count):
                fh.write(rng.standard_normal(tensor_elems, dtype=np.float32).tobytes())
        total += (folder / shard).stat().st_size
    (folder / f"{NAME}.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    return total


def warm(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                while fh.read(64 << 20):
                    pass


def without_timings(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc.pop("sharded", None)
    doc["totals"].pop("seconds")
    for f in doc["files"]:
        f["totals"].pop("seconds")
    return doc


def run(targets: list[str], path: str) -> tuple[float, Any]:
    from trainprobe.tasks import scan_sharded

    t0 = time.perf_counter()
    result = scan_sharded(targets, path, timeout=3600)
    return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="tp-sharded-bench-"))
    os.environ.setdefault("TRAINPROBE_RUNS_DIR", str(work / "runs"))
    everything = work / "all" / "ckpt"
    if not everything.exists():
        t0 = time.perf_counter()
        size = write_sharded(everything, args.targets, args.size_gb)
        took = time.perf_counter() - t0
        print(f"wrote {everything}: {args.targets} shards, {size / 1e9:.2f} GB in {took:.1f} s")
    size = sum(p.stat().st_size for p in everything.iterdir())
    nodes = [work / f"node{k}" for k in range(args.targets)]
    shards = sorted(p.name for p in everything.glob("*.safetensors"))
    for k, node in enumerate(nodes):
        shutil.rmtree(node, ignore_errors=True)
        (node / "ckpt").mkdir(parents=True)
        os.link(everything / shards[k], node / "ckpt" / shards[k])  # node k's local disk holds shard k
    # the index, as rank 0 writes it, is on node 0 (a copy: another inode, the same contents)
    shutil.copy2(everything / f"{NAME}.safetensors.index.json", nodes[0] / "ckpt")
    warm(work / "all")
    one = [f"local//cd={work / 'all'}"]
    many = [f"local//cd={node}" for node in nodes]
    runs: dict[str, list[tuple[float, Any]]] = {"one": [], "many": []}
    for _ in range(args.repeat):  # interleaved, so a noisy moment hits both
        runs["one"].append(run(one, "ckpt"))
        runs["many"].append(run(many, "ckpt"))
    load = os.getloadavg()[0]
    wall = {k: statistics.median(w for w, _r in v) for k, v in runs.items()}
    a, b = runs["one"][-1][1], runs["many"][-1][1]
    print(
        f"\n{size / 1e9:.2f} GB in {args.targets} shards, page cache warm, cpus {os.cpu_count()}, "
        f"load average {load:.1f}, medians of {args.repeat}"
    )
    print(f"  (a) one target reads all:           {wall['one']:7.2f} s")
    print(f"  (b) {args.targets} targets read their shards:   {wall['many']:7.2f} s")
    print(f"  (a) / (b): {wall['one'] / wall['many']:.2f}x")
    for label, result in (("(a)", a), ("(b)", b)):
        for t in result.to_json()["sharded"]["targets"]:
            rate = t["bytes"] / t["seconds"] / 1e9 if t["seconds"] else 0.0
            print(
                f"  {label} {t['target']:<50} {len(t['files'])} file(s) {t['bytes'] / 1e9:6.2f} GB "
                f"in {t['seconds']:6.2f} s: {rate:5.2f} GB/s"
            )
    for label, result in (("(a)", a), ("(b)", b)):
        scanning = max(t["seconds"] for t in result.to_json()["sharded"]["targets"])
        print(f"  {label} of which the slowest target's scan {scanning:.2f} s, the rest the two fleet rounds")
    same = without_timings(a.to_json()) == without_timings(b.to_json())
    print(f"  the two reports are {'equal' if same else 'NOT equal'}")
    one_rate = size / a.to_json()["sharded"]["targets"][0]["seconds"]
    print(
        f"  on paper: 1 TB on 64 nodes at (a)'s per-node rate ({one_rate / 1e9:.2f} GB/s, page cache): "
        f"{1e12 / 64 / one_rate:.1f} s of scanning per node, plus the two fleet rounds (connect, ship, list)"
    )
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
