"""Saving without stalls and without tears; ``check`` against ``scan`` on a 1 GB checkpoint.

1. Training stall per save in one training run (the same residual MLP, AdamW, CPU): naive in-loop
   ``torch.save`` (the baseline), the same plus fsync (as durable as the writer), naive ``torch.save`` from a
   background thread, ``CheckpointWriter``, and ``CheckpointWriter(overlap_copy=True)`` (its stall: the time
   in ``save()`` plus the time the next ``optimizer.step()`` was held by the writer's hook).
   Goal: the writer's median stall ≤ 10% of the in-loop save's.
2. The race: 100 saves from the naive background thread and 100 through ``CheckpointWriter`` while training
   continues; every file judged by ``trainprobe check``. Goal: the naive save tears at least once, the writer
   never.
3. ``check`` on a 1 GB checkpoint (model + AdamW state) against ``scan`` on it, and against ``scan --verify``
   (which does the same CRC32 pass): in-process (the library calls) and as whole ``trainprobe`` processes
   with their peak RSS; warm page cache, median of 3. Goal: within 2× of scan.
4. The Adam bound ``|m| <= (1-b1)/sqrt((1-b2)(1-b1²/b2))·sqrt(v)`` on real training: Adam, AdamW and
   AMSGrad, six beta pairs, with and without weight decay and gradient clipping, noisy gradients with spikes.
   Prints the largest |m|/sqrt(v) of consistent states as a fraction of the bound (must stay ≤ 1), and the
   same for torn pairs: m one step newer than v, and v one step newer than m.

    .venv/bin/python benchmarks/save.py [--quick] [--only stalls|race|check-vs-scan|adam-bound]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_path
from trainprobe.demo.race import train


def stalls(root: Path, *, layers: int, width: int, steps: int, save_every: int) -> None:
    print(f"1. stall per save: residual MLP {layers}x{width}, AdamW, a save every {save_every} steps")
    results = {}
    for mode in ("none", "in-loop", "in-loop-fsync", "background", "writer", "writer-overlap"):
        kwargs: dict[str, Any] = {"steps": steps, "save_every": save_every, "layers": layers, "width": width}
        run = train(root / mode, mode=mode, **kwargs)
        wall = run.loop_seconds
        size = run.checkpoints[-1].stat().st_size if run.checkpoints else 0
        results[mode] = (run.median_stall, wall)
        worst = max(run.stalls, default=0.0)
        # the step right after each save: where an overlapped copy (or a background write) competes
        after = statistics.median(run.step_seconds[save_every::save_every] or [0.0])
        print(
            f"   {mode:<14} median stall {run.median_stall * 1e3:6.1f} ms (max {worst * 1e3:5.0f})"
            f"   step {run.median_step * 1e3:5.1f} ms (after a save {after * 1e3:5.1f})"
            f"   loop time {wall:5.2f} s   checkpoint {size / 1e6:5.1f} MB"
        )
    base = results["in-loop"][0]
    for mode in ("background", "writer", "writer-overlap"):
        print(f"   {mode} stall / in-loop stall = {results[mode][0] / base:.3f}")
    durable = results["in-loop-fsync"][0]
    print(f"   writer stall / in-loop-fsync stall = {results['writer'][0] / durable:.3f} (both durable)")
    for mode in ("writer", "writer-overlap"):
        ratio = results[mode][0] / base
        print(f"   goal {mode} ≤ 0.10 × in-loop: {'MET' if ratio <= 0.10 else 'NOT MET'} ({ratio:.3f})")


def race(root: Path, *, saves: int) -> None:
    print(
        f"2. the race: {saves} saves each while training continues (32x256 residual MLP, a save every 5 "
        "steps)"
    )
    torn = {}
    for mode in ("background", "writer"):
        run = train(root / f"race-{mode}", steps=saves * 5, save_every=5, mode=mode, layers=32, width=256)
        verdicts = [check_path(str(p)).verdict for p in run.checkpoints]
        torn[mode] = sum(v != "consistent" for v in verdicts)
        counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
        print(f"   {mode:<11} {len(verdicts)} saves: {counts}")
    ok = torn["background"] >= 1 and torn["writer"] == 0
    print(
        f"   goal naive tears ≥ 1, writer 0: {'MET' if ok else 'NOT MET'} "
        f"(naive {torn['background']}/{saves} = {torn['background'] / saves:.0%}, writer {torn['writer']})"
    )


def _times(fn: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


# Runs the trainprobe CLI exactly as the console script does and prints the process's own peak resident set
# (VmHWM) last on stderr. wait4's ru_maxrss is no use here: a child inherits the high-water mark of this
# benchmark process (torch and the model loaded) across fork and exec.
_MEASURED = """
import runpy, sys
sys.argv = ["trainprobe", *sys.argv[1:]]
try:
    runpy.run_module("trainprobe", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as fh:
        print("VmHWM", next(line.split()[1] for line in fh if line.startswith("VmHWM:")), file=sys.stderr)
"""


def _process(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one ``trainprobe ARGS`` process."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED, *args], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"trainprobe {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return wall, int(proc.stderr.split()[-1]) / 1024


def _goal(ratio: float) -> str:
    return f"{ratio:.2f}× ({'MET' if ratio <= 2.0 else 'NOT MET'}: goal ≤ 2×)"


def check_vs_scan(root: Path, *, gigabytes: float, repeat: int, in_process: int) -> None:
    import torch

    torch.manual_seed(0)
    # Linear(4096, 4096) is 16.8M parameters; with AdamW's two moments 201 MB per layer.
    layers = max(1, round(gigabytes * 1e9 / (3 * 4 * 4096 * 4097)))
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(layers)])
    opt = torch.optim.AdamW(model.parameters())
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt.step()
    path = root / "big.pt"
    torch.save({"step": 1, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    del model, opt
    size = path.stat().st_size
    with open(path, "rb") as fh:  # warm page cache
        while fh.read(64 << 20):
            pass
    verdict = check_path(str(path)).verdict
    print(
        f"3. check vs scan on a {size / 1e9:.2f} GB checkpoint (fp32 model + AdamW state; check says "
        f"{verdict}); warm page cache, median (best in brackets)"
    )
    print(f"   in-process (the library calls; median of {in_process}):")
    runs: dict[str, list[float]] = {"scan": [], "scan --verify": [], "check": []}
    calls: dict[str, Callable[[], object]] = {
        "scan": lambda: scan([str(path)]),
        "scan --verify": lambda: scan([str(path)], verify=True),
        "check": lambda: check_path(str(path)),
    }
    for _ in range(in_process):  # interleaved, so a noisy moment on a shared machine hits all three alike
        for name, call in calls.items():
            runs[name] += _times(call, 1)
    mid = {name: statistics.median(times) for name, times in runs.items()}
    for name, times in runs.items():
        print(f"   {name:<14} {mid[name]:6.3f} s  [{min(times):6.3f}]  ({size / mid[name] / 1e9:5.2f} GB/s)")
    print(
        f"   check / scan = {_goal(mid['check'] / mid['scan'])}   check / scan --verify = "
        f"{mid['check'] / mid['scan --verify']:.2f}"
    )
    print(
        "   whole processes (`trainprobe scan FILE`, `trainprobe scan --verify FILE`, "
        f"`trainprobe check FILE`; median of {repeat}, interleaved):"
    )
    procs: dict[str, list[tuple[float, float]]] = {"scan": [], "scan --verify": [], "check": []}
    argv = {
        "scan": ["scan", str(path)],
        "scan --verify": ["scan", "--verify", str(path)],
        "check": ["check", str(path)],
    }
    for _ in range(repeat):
        for name, args in argv.items():
            procs[name].append(_process(args))
    wall = {name: statistics.median(w for w, _r in runs_) for name, runs_ in procs.items()}
    rss = {name: statistics.median(r for _w, r in runs_) for name, runs_ in procs.items()}
    for name, runs_ in procs.items():
        print(
            f"   {name:<14} {wall[name]:6.3f} s  [{min(w for w, _r in runs_):6.3f}]   "
            f"peak RSS {rss[name]:6.0f} MiB"
        )
    print(
        f"   check / scan = {_goal(wall['check'] / wall['scan'])}   peak RSS check / scan = "
        f"{rss['check'] / rss['scan']:.2f}"
    )


def adam_bound(steps: int) -> None:
    import itertools

    import torch

    from trainprobe.checkpoint.check import adam_bound as bound_of

    def worst(m: torch.Tensor, v: torch.Tensor) -> float:
        mask = v > 0
        return float((m[mask].abs() / v[mask].sqrt()).max()) if mask.any() else 0.0

    print(
        f"4. the Adam bound on real training ({steps} steps per run; ratios are max |m|/sqrt(v) ÷ the bound)"
    )
    print("   betas        bound   consistent   m newer than v (min..max)   v newer than m")
    torch.manual_seed(0)
    for b1, b2 in [(0.9, 0.999), (0.9, 0.95), (0.95, 0.999), (0.99, 0.999), (0.5, 0.9), (0.0, 0.99)]:
        bound = bound_of(b1, b2)
        assert bound is not None
        consistent, m_newer, v_newer = 0.0, [], 0.0
        for wd, clip, kind in itertools.product([0.0, 0.1], [None, 0.5], ["adam", "adamw", "amsgrad"]):
            model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
            opt_cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
            opt = opt_cls(
                model.parameters(), lr=1e-2, betas=(b1, b2), weight_decay=wd, amsgrad=kind == "amsgrad"
            )
            prev: list[tuple[torch.Tensor, torch.Tensor]] = []
            run_m_newer = 0.0
            for step in range(steps):
                x = torch.randn(8, 16)
                spike = 10.0 if step % 50 == 49 else 1.0
                y = (2 * x[:, :1]).sin() + spike * torch.randn(8, 1)
                loss = (model(x) - y).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                if clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                opt.step()
                cur = [(s["exp_avg"].clone(), s["exp_avg_sq"].clone()) for s in opt.state.values()]
                consistent = max(consistent, max(worst(m, v) for m, v in cur) / bound)
                if prev:
                    run_m_newer = max(
                        run_m_newer,
                        max(worst(mc, vp) for (mc, _), (_, vp) in zip(cur, prev, strict=True)) / bound,
                    )
                    v_newer = max(
                        v_newer,
                        max(worst(mp, vc) for (mp, _), (_, vc) in zip(prev, cur, strict=True)) / bound,
                    )
                prev = cur
            m_newer.append(run_m_newer)
        print(
            f"   {b1:<4}/{b2:<6} {bound:7.3f}   {consistent:10.4f}"
            f"   {min(m_newer):10.3g} .. {max(m_newer):<10.3g}      {v_newer:8.3f}"
        )
    print(
        "   (consistent must be ≤ 1; 'm newer than v' ≫ 1 is what check flags; 'v newer than m' stays near 1,"
    )
    print("    so that direction of tear is not visible through the bound — step counters catch it instead)")


PARTS = ("stalls", "race", "check-vs-scan", "adam-bound")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test of the benchmark)")
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="run only this part (repeatable; default: all four)"
    )
    args = parser.parse_args()
    parts = args.only or PARTS
    with tempfile.TemporaryDirectory(prefix="trainprobe-bench-save-") as tmp:
        root = Path(tmp)
        if "stalls" in parts:
            if args.quick:
                stalls(root, layers=16, width=256, steps=30, save_every=10)
            else:
                stalls(root, layers=48, width=512, steps=100, save_every=10)
        if "race" in parts:
            race(root, saves=20 if args.quick else 100)
        if "check-vs-scan" in parts:
            check_vs_scan(
                root,
                gigabytes=0.2 if args.quick else 1.0,
                repeat=2 if args.quick else 3,
                in_process=3 if args.quick else 7,
            )
        if "adam-bound" in parts:
            adam_bound(steps=60 if args.quick else 300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
