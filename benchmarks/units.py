"""The cost of units and fingerprints: ``scan`` of a 1 GB Hugging Face ``checkpoint-N/`` folder as one
unit, against the scan of its files by the trainprobe of a baseline git ref (default ``main``), same run.

Writes a Trainer-shaped folder (``model.safetensors`` ~1/3 of the bytes, ``optimizer.pt`` with AdamW
``exp_avg``/``exp_avg_sq`` ~2/3, ``scheduler.pt``, ``rng_state.pth``, ``trainer_state.json``,
``training_args.bin``, ``config.json``), warms the page cache, then runs each scan as its own process
(interleaved, median of N): the baseline's ``trainprobe.checkpoint.scan`` over the folder (file by file, as it
was) and this tree's (one unit, tensor roles, step sources, per-tensor fingerprints in the NaN pass).
Prints wall time of the whole process, the scan's own seconds, peak RSS (wait4) and peak anonymous memory
(sampled from /proc), and the ratios against the goals: unit scan <= 1.2x the file scan, peak anon < 64 MiB.

    .venv/bin/python benchmarks/units.py [--ref main] [--size-gb 1.0] [--repeat 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from trainprobe.checkpoint import scan
t0 = time.perf_counter()
report = scan([sys.argv[2]])
data = report.to_json()
print(json.dumps({"seconds": time.perf_counter() - t0, "exit_code": data["exit_code"],
                  "units": len(data.get("units", data["files"])), "files": len(data["files"])}))
"""


def baseline_src(ref: str, into: Path) -> Path:
    """The ``src`` tree of ``ref`` (git archive: the repository and its worktrees are left untouched)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def write_hf_checkpoint(folder: Path, size_gb: float) -> int:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    width = 4096
    layers = max(1, round(size_gb * 1e9 / 3 / (width * width * 4)))
    torch.manual_seed(0)
    params = [torch.randn(width, width) * 0.02 for _ in range(layers)]
    save_file({f"layers.{i}.weight": p for i, p in enumerate(params)}, str(folder / "model.safetensors"))
    state = {
        i: {"step": torch.tensor(10.0), "exp_avg": p * 1e-3, "exp_avg_sq": (p * 1e-3) ** 2}
        for i, p in enumerate(params)
    }
    groups = [{"lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "params": list(state)}]
    torch.save({"state": state, "param_groups": groups}, folder / "optimizer.pt")
    torch.save({"last_epoch": 10, "base_lrs": [1e-4], "_step_count": 11}, folder / "scheduler.pt")
    torch.save({"cpu": torch.random.get_rng_state()}, folder / "rng_state.pth")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 10, "log_history": []}))
    (folder / "config.json").write_text("{}")
    torch.save({"output_dir": "out", "learning_rate": 1e-4}, folder / "training_args.bin")
    return sum(f.stat().st_size for f in folder.iterdir())


def _anon_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(argv: list[str]) -> dict[str, Any]:
    """One process: wall seconds, peak RSS MiB (wait4), peak anonymous MiB (sampled), its JSON line."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        peak_anon = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_anon = max(peak_anon, _anon_kib(proc.pid))
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[2:]} failed: {text}")
    return {"wall": wall, "rss": usage.ru_maxrss / 1024, "anon": peak_anon / 1024, **json.loads(text)}


def warm(folder: Path) -> None:
    for f in folder.iterdir():
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ref", default="main", help="git ref whose trainprobe is the baseline (default main)"
    )
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="tp-units-bench-"))
    folder = work / "out" / "checkpoint-10"
    size = sum(f.stat().st_size for f in folder.iterdir()) if folder.exists() else 0
    if not size:
        t0 = time.perf_counter()
        size = write_hf_checkpoint(folder, args.size_gb)
        print(f"wrote {folder}: {size / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s")
    base = baseline_src(args.ref, work / "baseline")
    here = REPO / "src"
    warm(folder)
    runs: dict[str, list[dict[str, Any]]] = {"files": [], "unit": []}
    for _ in range(args.repeat):  # interleaved, so a noisy moment hits both
        runs["files"].append(measure([sys.executable, "-c", PROBE, str(base), str(folder)]))
        runs["unit"].append(measure([sys.executable, "-c", PROBE, str(here), str(folder)]))
    load = os.getloadavg()[0]
    print(
        f"\n{folder} ({size / 1e9:.2f} GB), page cache warm, cpus {os.cpu_count()}, load average {load:.1f}"
    )
    print(f"  {'scan':<44} {'wall s':>8} {'scan s':>8} {'peak RSS MiB':>13} {'peak anon MiB':>14}")
    med: dict[str, dict[str, float]] = {}
    for key, label in (("files", f"{args.ref}: its files, one by one"), ("unit", "this tree: one unit")):
        rows = runs[key]
        med[key] = {k: statistics.median(r[k] for r in rows) for k in ("wall", "seconds", "rss", "anon")}
        m = med[key]
        print(
            f"  {label:<44} {m['wall']:>8.3f} {m['seconds']:>8.3f} {m['rss']:>13.0f} {m['anon']:>14.1f}"
            f"   ({rows[0]['units']} unit(s), {rows[0]['files']} file report(s))"
        )
    whole = med["unit"]["wall"] / med["files"]["wall"]
    own = med["unit"]["seconds"] / med["files"]["seconds"]
    anon = med["unit"]["anon"]
    print(
        f"  unit / files, whole process: {whole:.2f}x ({'MET' if whole <= 1.2 else 'NOT MET'}: goal <= 1.2x)"
    )
    print(f"  unit / files, the scan itself: {own:.2f}x")
    met = "MET" if anon < 64 else "NOT MET"
    print(f"  peak anonymous memory of the unit scan: {anon:.1f} MiB ({met}: < 64)")


if __name__ == "__main__":
    main()
