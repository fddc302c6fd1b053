"""Benchmark `trainprobe scan` against what people do today, on a ~1 GB fp32 model + AdamW checkpoint, and
the CLI's start-up against the interpreter's.

Part 1, start-up (what an agent pays on every one of its dozens of calls): each command runs ``--repeat``
times, interleaved, in its own process; the medians (wall and CPU time) are compared with baselines measured
in the same run:

  trainprobe --version                 vs python -c pass            goal <= 1.2x pass + 30 ms
  trainprobe scan small.safetensors    vs python -c "import numpy"  goal <= 1.5x (a 16-tensor file, stdout
                                                                    a pipe: the whole process)

Part 2, a large checkpoint: writes the checkpoint (and a bf16 variant) into a temporary directory, warms the
page cache (dropping it needs privileges, so every method reads from memory), then runs each method in its
own process, ``--large-repeat`` times (medians), and reports wall time, peak RSS (from wait4) and peak
anonymous memory (sampled from /proc):

  (a) naive:  torch.load(weights_only=False) + torch.isnan/isinf per tensor (the seed's script)
  (b) mmap:   torch.load(mmap=True, weights_only=True) + torch.isfinite per tensor
  (c) trainprobe scan, the whole CLI process (--json, so the scan's own time is reported too)
  (d) floor:  one chunked np.isfinite pass over the memory-mapped file, in-process

Goals: (c) >= 20x faster than (a), >= 5x faster than (b); the scan itself within 1.5x of (d).

Part 3, every core (issue 25): one fp32 model + AdamW checkpoint of ``--size-mb`` (600 MB) and a directory
of ``--files`` (8) copies of it, page cache warm; interleaved, ``--cores-repeat`` times (medians), each
method its own process:

  trainprobe scan --json FILE (default workers; and --workers 1)   vs  the one-core floor: python, import
  trainprobe scan --json DIR  (default workers; and --workers 1)       numpy and one chunked np.isfinite pass
                                                                       over each memory-mapped file
  cat FILES > /dev/null: a plain sequential read of the same bytes (GB/s)

Goals, the scan itself (its JSON totals.seconds) against the floor's pass (as part 2 compares them; the
whole processes are printed too: there the start-up of each weighs in): the single file <= 0.65x the
floor, the directory <= 0.6x, on 2 cores; on 16 cores the directory's GB/s >= 70% of the plain read's.

Usage: python benchmarks/scan.py [--size-gb 1.0] [--keep DIR] [--repeat 21] [--large-repeat 3]
                                 [--size-mb 600] [--files 8] [--cores-repeat 5] [--baseline SRC]
                                 [--only startup|large|cores]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))

NAIVE = r"""
import sys, torch
sd = torch.load(sys.argv[1], weights_only=False, map_location="cpu")
bad = 0
def walk(o):
    global bad
    if isinstance(o, torch.Tensor):
        if o.is_floating_point():
            bad += int(torch.isnan(o).sum()) + int(torch.isinf(o).sum())
    elif isinstance(o, dict):
        for v in o.values(): walk(v)
    elif isinstance(o, (list, tuple)):
        for v in o: walk(v)
walk(sd)
print(bad)
"""

MMAP = r"""
import sys, torch
sd = torch.load(sys.argv[1], mmap=True, weights_only=True, map_location="cpu")
bad = 0
def walk(o):
    global bad
    if isinstance(o, torch.Tensor):
        if o.is_floating_point() and not bool(torch.isfinite(o).all()):
            bad += 1
    elif isinstance(o, dict):
        for v in o.values(): walk(v)
    elif isinstance(o, (list, tuple)):
        for v in o: walk(v)
walk(sd)
print(bad)
"""

FLOOR = r"""
import mmap, sys, time
import numpy as np
with open(sys.argv[1], "rb") as fh:
    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
dtype = np.dtype(sys.argv[2])
t0 = time.perf_counter()
arr = np.frombuffer(mm, dtype=dtype, count=len(mm) // dtype.itemsize)
chunk = (16 << 20) // dtype.itemsize
ok = True
if dtype == np.uint16:  # bfloat16 bits
    for i in range(0, arr.size, chunk):
        ok &= not bool(((arr[i : i + chunk] & 0x7F80) == 0x7F80).any())
else:
    for i in range(0, arr.size, chunk):
        ok &= bool(np.isfinite(arr[i : i + chunk]).all())
print(time.perf_counter() - t0)
"""


FLOOR_FILES = r"""
import mmap, sys, time
import numpy as np
t0 = time.perf_counter()
chunk = (16 << 20) // 4
ok = True
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    arr = np.frombuffer(mm, dtype="<f4", count=len(mm) // 4)
    for i in range(0, arr.size, chunk):
        ok &= bool(np.isfinite(arr[i : i + chunk]).all())
print(time.perf_counter() - t0)
"""


def write_checkpoint(path: Path, size_gb: float, dtype_name: str) -> int:
    import torch

    dtype = getattr(torch, dtype_name)
    itemsize = torch.tensor([], dtype=dtype).element_size()
    params_total = int(size_gb * 1e9 / (3 * itemsize))  # weights + exp_avg + exp_avg_sq
    dim = 4096
    shapes = [(dim, dim)] * (params_total // (dim * dim)) + [(params_total % (dim * dim) // dim, dim)]
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s).to(dtype) * 0.02) for s in shapes if s[0]]
    opt = torch.optim.AdamW(params, lr=1e-4)
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt.step()
    model = {f"layers.{i}.weight": p.detach() for i, p in enumerate(params)}
    torch.save({"model_state_dict": model, "optimizer_state_dict": opt.state_dict(), "step": 1}, path)
    return sum(p.numel() for p in params)


def _anon_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(argv: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, peak RSS (MiB, from wait4), peak anonymous memory (MiB, sampled), stdout of a process."""
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        return _measure(argv, out_file, err_file)


def _measure(argv: list[str], out_file: Any, err_file: Any) -> tuple[float, float, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out_file, stderr=err_file)
    peak_anon = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak_anon = max(peak_anon, _anon_kib(proc.pid))
        time.sleep(0.005)
    out_file.seek(0)
    err_file.seek(0)
    out, err = out_file.read().decode(), err_file.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}): {err}")
    return wall, usage.ru_maxrss / 1024, peak_anon / 1024, out


def warm(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(64 << 20):
            pass


def bench(path: Path, np_dtype: str, label: str, repeat: int) -> dict[str, float]:
    py = sys.executable
    warm(path)
    commands = {
        "a": [py, "-c", NAIVE, str(path)],
        "b": [py, "-c", MMAP, str(path)],
        "c": [TRAINPROBE, "scan", "--json", str(path)],
        "d": [py, "-c", FLOOR, str(path), np_dtype],
    }
    samples: dict[str, list[tuple[float, float, float]]] = {key: [] for key in commands}
    scan_times: list[float] = []
    floor_times: list[float] = []
    for _ in range(repeat):
        for key, argv in commands.items():
            *row, out = measure(argv)
            samples[key].append((row[0], row[1], row[2]))
            if key == "c":
                scan_times.append(json.loads(out)["totals"]["seconds"])
            elif key == "d":
                floor_times.append(float(out))
    rows = {
        key: (
            statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs),
            statistics.median(r[2] for r in runs),
        )
        for key, runs in samples.items()
    }
    scan_seconds = statistics.median(scan_times)
    floor_seconds = statistics.median(floor_times)

    size = path.stat().st_size
    print(
        f"\n{label}: {path.name}, {size / 1e9:.2f} GB, page cache warm, medians of {repeat}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    names = {
        "a": "(a) torch.load(weights_only=False) + isnan/isinf",
        "b": "(b) torch.load(mmap=True, weights_only=True) + isfinite",
        "c": "(c) trainprobe scan (whole process)",
        "d": "(d) floor: chunked np.isfinite over the mmap (whole process)",
    }
    print(f"  {'method':<62} {'wall s':>7} {'peak RSS MiB':>13} {'peak anon MiB':>14}")
    for key, (w, r, a) in rows.items():
        print(f"  {names[key]:<62} {w:>7.2f} {r:>13.0f} {a:>14.0f}")
    print(f"  {'    the scan itself (JSON totals.seconds)':<62} {scan_seconds:>7.3f}")
    print(f"  {'    the floor pass itself':<62} {floor_seconds:>7.3f}")
    ratios = {
        "a/c": rows["a"][0] / rows["c"][0],
        "b/c": rows["b"][0] / rows["c"][0],
        "scan/floor": scan_seconds / floor_seconds,
    }
    print(f"  (c) vs (a): {ratios['a/c']:.1f}x faster (goal >= 20x)")
    print(f"  (c) vs (b): {ratios['b/c']:.1f}x faster (goal >= 5x)")
    print(f"  scan itself vs floor pass: {ratios['scan/floor']:.2f}x the floor's time (goal <= 1.5x)")
    return ratios


SMALL_TENSORS = 16


def write_small_safetensors(path: Path) -> None:
    """A small real-shaped safetensors file (16 float32 tensors of 64x64, one with a NaN), without torch."""
    import struct

    header: dict[str, Any] = {}
    data = bytearray()
    for i in range(SMALL_TENSORS):
        values = [0.01 * (j % 97) for j in range(64 * 64)]
        if i == 3:
            values[5] = float("nan")
        header[f"layers.{i}.weight"] = {
            "dtype": "F32",
            "shape": [64, 64],
            "data_offsets": [len(data), len(data) + 4 * len(values)],
        }
        data += struct.pack(f"<{len(values)}f", *values)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + bytes(data))


def startup_times(commands: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each command, run ``repeat`` times interleaved (so a burst of load hits
    them all alike), stdout and stderr pipes as an agent's are."""
    for argv in commands.values():  # once each first: page cache and .pyc files
        subprocess.run(argv, capture_output=True, check=False)
    wall: dict[str, list[float]] = {key: [] for key in commands}
    cpu: dict[str, list[float]] = {key: [] for key in commands}
    for _ in range(repeat):
        for key, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, check=False)
            wall[key].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[key].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if proc.returncode not in (0, 1):
                raise RuntimeError(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()}")
    return {key: (statistics.median(wall[key]), statistics.median(cpu[key])) for key in commands}


def bench_startup(tmp: Path, repeat: int) -> dict[str, float]:
    small = tmp / "small.safetensors"
    write_small_safetensors(small)
    py = sys.executable
    times = startup_times(
        {
            "pass": [py, "-c", "pass"],
            "version": [TRAINPROBE, "--version"],
            "numpy": [py, "-c", "import numpy"],
            "scan": [TRAINPROBE, "scan", str(small)],
        },
        repeat,
    )
    names = {
        "pass": "python -c pass",
        "version": "trainprobe --version",
        "numpy": 'python -c "import numpy"',
        "scan": f"trainprobe scan {small.name} ({SMALL_TENSORS} tensors, stdout a pipe)",
    }
    print(f"\nstart-up: medians of {repeat}, interleaved, load average {os.getloadavg()[0]:.1f}")
    print(f"  {'process':<62} {'wall ms':>8} {'CPU ms':>8}")
    for key, (w, c) in times.items():
        print(f"  {names[key]:<62} {w * 1e3:>8.1f} {c * 1e3:>8.1f}")
    (pass_wall, pass_cpu), (version_wall, version_cpu) = times["pass"], times["version"]
    budget = 1.2 * pass_wall + 0.030
    ratios = {
        "version/pass": version_wall / pass_wall,
        "version/budget": version_wall / budget,
        "scan/numpy": times["scan"][0] / times["numpy"][0],
    }
    verdict = "met" if version_wall <= budget else "missed"
    print(
        f"  trainprobe --version: {ratios['version/pass']:.2f}x python -c pass "
        f"(goal <= 1.2x pass + 30 ms = {budget * 1e3:.1f} ms: {verdict}; CPU {version_cpu / pass_cpu:.2f}x)"
    )
    print(
        f'  trainprobe scan of a small file: {ratios["scan/numpy"]:.2f}x python -c "import numpy" '
        f"(goal <= 1.5x; CPU {times['scan'][1] / times['numpy'][1]:.2f}x)"
    )
    return ratios


def bench_cores(tmp: Path, size_mb: float, files: int, repeat: int, baseline: str | None) -> dict[str, float]:
    """Part 3: the scan of one file and of a directory of ``files`` files against the one-core floor over the
    same files and a plain sequential read of them, interleaved, medians of ``repeat``; ``baseline``: a
    source tree (``src`` of another checkout) whose scans are measured beside."""
    single = tmp / "cores" / "model.pt"
    folder = tmp / "cores" / "dir"
    folder.mkdir(parents=True, exist_ok=True)
    copies = [folder / f"model-{i}.pt" for i in range(files)]
    made = tmp / "cores" / "written.txt"  # what a --keep directory holds already: written once
    if not made.exists() or made.read_text() != f"{size_mb} {files}":
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, __file__, "--write", str(single), "float32", str(size_mb / 1000)],
            check=True,
            capture_output=True,
        )
        for copy in copies:
            shutil.copyfile(single, copy)
        made.write_text(f"{size_mb} {files}")
        print(
            f"\nwrote {single.name} ({single.stat().st_size / 1e6:.0f} MB) and {files} copies in "
            f"{time.perf_counter() - t0:.1f} s"
        )
    for path in (single, *copies):
        warm(path)
    py = sys.executable
    commands = {
        "file": [TRAINPROBE, "scan", "--json", str(single)],
        "file-1": [TRAINPROBE, "scan", "--json", "--workers", "1", str(single)],
        "file-floor": [py, "-c", FLOOR_FILES, str(single)],
        "file-cat": ["cat", str(single)],
        "dir": [TRAINPROBE, "scan", "--json", str(folder)],
        "dir-1": [TRAINPROBE, "scan", "--json", "--workers", "1", str(folder)],
        "dir-floor": [py, "-c", FLOOR_FILES, *map(str, copies)],
        "dir-cat": ["cat", *map(str, copies)],
    }
    if baseline:  # the same scans by another source tree (before a change), in the same run
        commands = {
            **{k: v for k, v in commands.items() if k.startswith("file")},
            "file-base": ["env", f"PYTHONPATH={baseline}", *commands["file"]],
            **{k: v for k, v in commands.items() if k.startswith("dir")},
            "dir-base": ["env", f"PYTHONPATH={baseline}", *commands["dir"]],
        }
    load_before = os.getloadavg()
    wall: dict[str, list[float]] = {key: [] for key in commands}
    inner: dict[str, list[float]] = {key: [] for key in commands}
    anon: dict[str, list[float]] = {key: [] for key in commands}
    for _ in range(repeat):
        for key, argv in commands.items():
            w, _rss, a, out = measure(argv) if not key.endswith("cat") else (*_cat(argv), "")
            wall[key].append(w)
            anon[key].append(a)
            if key.endswith("floor"):
                inner[key].append(float(out))
            elif not key.endswith("cat"):
                inner[key].append(json.loads(out)["totals"]["seconds"])
    med = {key: statistics.median(v) for key, v in wall.items()}
    med_inner = {key: statistics.median(v) for key, v in inner.items() if v}
    load_after = os.getloadavg()
    print(
        f"every core: {os.cpu_count()} cpus ({len(os.sched_getaffinity(0))} usable), page cache warm, "
        f"medians of {repeat}, interleaved; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after"
    )
    print(f"  {'process':<58} {'wall s':>7} {'itself s':>9} {'GB/s':>6} {'anon MiB':>9}")
    sizes = {"file": single.stat().st_size, "dir": sum(c.stat().st_size for c in copies)}
    names = {
        "file": f"trainprobe scan FILE ({sizes['file'] / 1e6:.0f} MB)",
        "file-1": "trainprobe scan --workers 1 FILE",
        "file-floor": "floor: one chunked np.isfinite pass over FILE",
        "file-cat": "cat FILE > /dev/null",
        "dir": f"trainprobe scan DIR ({files} files, {sizes['dir'] / 1e9:.1f} GB)",
        "dir-1": "trainprobe scan --workers 1 DIR",
        "dir-floor": f"floor: one chunked np.isfinite pass over the {files} files",
        "dir-cat": f"cat the {files} files > /dev/null",
        "file-base": f"baseline ({baseline}): trainprobe scan FILE",
        "dir-base": f"baseline ({baseline}): trainprobe scan DIR",
    }
    for key in commands:
        size = sizes[key.split("-")[0]]
        itself = f"{med_inner[key]:>9.3f}" if key in med_inner else f"{'':>9}"
        print(
            f"  {names[key]:<58} {med[key]:>7.3f} {itself} {size / med[key] / 1e9:>6.2f} "
            f"{statistics.median(anon[key]):>9.0f}"
        )
    ratios = {
        "file/floor": med_inner["file"] / med_inner["file-floor"],
        "dir/floor": med_inner["dir"] / med_inner["dir-floor"],
        "file/floor whole": med["file"] / med["file-floor"],
        "dir/floor whole": med["dir"] / med["dir-floor"],
        "file/one-worker": med_inner["file"] / med_inner["file-1"],
        "dir/one-worker": med_inner["dir"] / med_inner["dir-1"],
        "dir/cat": med["dir-cat"] / med_inner["dir"],
    }
    for key, label, goal in (("file", "single file", 0.65), ("dir", "directory  ", 0.6)):
        print(
            f"  {label}: the scan itself {ratios[f'{key}/floor']:.2f}x the floor pass's time "
            f"(goal <= {goal}x on 2 cores; whole processes {ratios[f'{key}/floor whole']:.2f}x); "
            f"{ratios[f'{key}/one-worker']:.2f}x its own --workers 1"
        )
    print(
        f"  directory:   the scan itself at {ratios['dir/cat']:.0%} of the plain sequential read's GB/s "
        "(goal >= 70% on 16 cores)"
    )
    if baseline:
        for key in ("file", "dir"):
            ratios[f"{key}/baseline"] = med_inner[key] / med_inner[f"{key}-base"]
            print(
                f"  {key:<4} the scan itself {ratios[f'{key}/baseline']:.2f}x the baseline's "
                f"(floor: the baseline {med_inner[f'{key}-base'] / med_inner[f'{key}-floor']:.2f}x)"
            )
    return ratios


def _cat(argv: list[str]) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0, 0.0, 0.0


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--write":
        # A child of the benchmark: torch's memory must not inflate the parent the measured processes
        # fork from.
        print(write_checkpoint(Path(sys.argv[2]), float(sys.argv[4]), sys.argv[3]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-gb", type=float, default=1.0, help="checkpoint size (default 1.0)")
    parser.add_argument("--keep", help="write the checkpoints here and keep them")
    parser.add_argument("--repeat", type=int, default=21, help="start-up runs per command (default 21)")
    parser.add_argument(
        "--large-repeat", type=int, default=3, help="runs per method on the large checkpoint (default 3)"
    )
    parser.add_argument("--size-mb", type=float, default=600, help="part 3's file size (default 600)")
    parser.add_argument("--files", type=int, default=8, help="part 3's files in the directory (default 8)")
    parser.add_argument("--cores-repeat", type=int, default=5, help="part 3's runs per method (default 5)")
    parser.add_argument(
        "--baseline", metavar="SRC", help="part 3: also scan with this source tree first on PYTHONPATH"
    )
    parser.add_argument("--only", choices=("startup", "large", "cores"), help="one part only")
    args = parser.parse_args()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="trainprobe-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}")
        if args.only in (None, "startup"):
            bench_startup(tmp, args.repeat)
        if args.only in (None, "cores"):
            bench_cores(tmp, args.size_mb, args.files, args.cores_repeat, args.baseline)
        if args.only in ("startup", "cores"):
            return
        for dtype_name, np_dtype in (("float32", "<f4"), ("bfloat16", "<u2")):
            path = tmp / f"model-adamw-{dtype_name}.pt"
            t0 = time.perf_counter()
            n = int(
                subprocess.run(
                    [sys.executable, __file__, "--write", str(path), dtype_name, str(args.size_gb)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            print(
                f"wrote {path.name}: {n / 1e6:.0f}M parameters + AdamW state "
                f"in {time.perf_counter() - t0:.1f} s"
            )
            bench(path, np_dtype, dtype_name, args.large_repeat)
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
