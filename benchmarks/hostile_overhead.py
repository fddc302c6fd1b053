"""Benchmark: does the stricter reading of issue 14 (every pickle's opcodes walked before unpickling, every
tensor found by an explicit stack, strict safetensors headers, bounded names) cost scan speed or memory?

The baseline is ``main`` itself, checked out by ``git worktree add`` into a temporary directory and run in the
same run, by the same interpreter, on the same files (``PYTHONPATH`` picks the tree). Each command runs
``--repeat`` times, the two trees interleaved so a burst of load hits both alike; the figures are medians:
wall time of the whole ``trainprobe scan --json`` process, the scan's own time (its JSON ``totals.seconds``),
its CPU time and its peak RSS (from wait4). Reported as ratios this tree / main (goal: within 5%).

Checkpoints (written with torch into a temporary directory):
  large     a ~1 GB fp32 model + AdamW state (60 tensors): the data pass dominates
  many      8,000 small tensors (1,000 Linear layers + AdamW, 50 MB): the pickle walk and naming dominate
  legacy    the same 8,000 tensors in torch's legacy format (five pickles walked one after another)
  st-many   20,000 tensors in one safetensors file: the header checks dominate

Usage: python benchmarks/hostile_overhead.py [--baseline main] [--repeat 7] [--size-gb 1.0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WRITE = r"""
import sys, torch
kind, path, size_gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
torch.manual_seed(0)
if kind == "large":
    dim = 4096
    n = max(1, int(size_gb * 1e9 / (3 * 4 * dim * dim)))
    params = [torch.nn.Parameter(torch.randn(dim, dim) * 0.02) for _ in range(n)]
    opt = torch.optim.AdamW(params, lr=1e-4)
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt.step()
    torch.save({"model": {f"layers.{i}.weight": p.detach() for i, p in enumerate(params)},
                "optimizer": opt.state_dict(), "step": 1}, path)
elif kind in ("many", "legacy"):
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(1000)])
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 64)).sum().backward()
    opt.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 3}, path,
               _use_new_zipfile_serialization=kind == "many")
else:
    from safetensors.torch import save_file
    save_file({f"t.{i}": torch.randn(16) for i in range(20000)}, path)
"""


def checkout(baseline: str, where: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(where), baseline],
        check=True,
        capture_output=True,
    )
    return where


def measure(tree: Path, path: Path) -> tuple[float, float, float, float]:
    """(wall s, scan s, CPU s, peak RSS MiB) of one ``trainprobe scan --json`` process of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainprobe", "scan", "--json", str(path)],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"scan of {path} with {tree} exited {proc.returncode}")
        out.seek(0)
        report = json.loads(out.read())
    return wall, report["totals"]["seconds"], usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def check_tree(tree: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    found = subprocess.run(
        [sys.executable, "-c", "import trainprobe; print(trainprobe.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    if not found.startswith(str(tree)):
        raise RuntimeError(f"PYTHONPATH={tree}/src imports trainprobe from {found}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default="main", help="the git revision to compare with (default main)")
    parser.add_argument("--repeat", type=int, default=7, help="runs per tree and checkpoint (default 7)")
    parser.add_argument(
        "--size-gb", type=float, default=1.0, help="size of the large checkpoint (default 1.0)"
    )
    parser.add_argument("--only", nargs="*", choices=("large", "many", "legacy", "st-many"), help="some only")
    parser.add_argument("--keep", help="write the checkpoints here and keep them")
    args = parser.parse_args()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="trainprobe-hostile-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    base = tmp / "baseline"
    try:
        checkout(args.baseline, base)
        trees = {"main": base, "this": REPO}
        for tree in trees.values():
            check_tree(tree)
        files = {
            "large": tmp / "large.pt",
            "many": tmp / "many.pt",
            "legacy": tmp / "legacy.pt",
            "st-many": tmp / "many.safetensors",
        }
        kinds = args.only or list(files)
        print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}, baseline {args.baseline}")
        for kind in kinds:
            if not files[kind].exists():
                subprocess.run(
                    [sys.executable, "-c", WRITE, kind, str(files[kind]), str(args.size_gb)], check=True
                )
            with open(files[kind], "rb") as fh:  # warm the page cache: both trees read from memory
                while fh.read(64 << 20):
                    pass
            samples: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in trees}
            for tree in trees.values():  # once each first: .pyc files
                measure(tree, files[kind])
            for _ in range(args.repeat):
                for name, tree in trees.items():
                    samples[name].append(measure(tree, files[kind]))
            med = {
                name: tuple(statistics.median(s[i] for s in runs) for i in range(4))
                for name, runs in samples.items()
            }
            size = files[kind].stat().st_size
            load = os.getloadavg()[0]
            print(f"\n{kind}: {size / 1e6:,.0f} MB, medians of {args.repeat}, load average {load:.1f}")
            print(f"  {'tree':<6} {'wall s':>8} {'scan s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
            for name, (wall, scan, cpu, rss) in med.items():
                print(f"  {name:<6} {wall:>8.3f} {scan:>8.3f} {cpu:>8.3f} {rss:>13.0f}")
            this, main_ = med["this"], med["main"]
            ratios = [this[i] / main_[i] for i in range(4)]
            print(
                f"  this/main: wall {ratios[0]:.3f}, scan {ratios[1]:.3f}, CPU {ratios[2]:.3f}, "
                f"peak RSS {ratios[3]:.3f} (goal: within 5%)"
            )
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], capture_output=True
        )
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
