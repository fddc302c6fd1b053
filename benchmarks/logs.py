"""Benchmark `trainprobe logs`: the reader's rate for every line shape it knows, its memory, the detectors.

In one run, for each shape of tests/metrics/synthetic.py's ``SHAPES`` (plain and timestamped text lines of
the common loggers, Megatron's long lines, the HF Trainer's printed dicts, JSONL) it writes a log into a
temporary directory (deleted afterwards) and reports

  - parse: lines per second of trainprobe's reader, wall clock and per CPU-second (format detection
    included); goal >= 1 M lines/s for every shape;
  - memory (``--memory``, a second, smaller pass under tracemalloc, at N and 2N rows): the peak against the
    columns the reader returns. The peak above the columns stays a fraction of one column (the file is read
    in 8 MB chunks; nothing holds it whole), so it is flat in the file's size;
  - analysis (pipes and JSONL): every detector on the parsed rows, as a multiple of parsing alone (goal
    <= 2x), and a pandas baseline (read + rolling(50) median) when pandas is installed.

Usage: python benchmarks/logs.py [--rows 2000000] [--shapes pipes,jsonl] [--memory] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from trainprobe.metrics import analyze, read_logs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from metrics.synthetic import SHAPES, write_shape_log  # the tests' synthetic logs


def pandas_baseline(path: Path, shape: str) -> float | None:
    try:
        import pandas as pd  # type: ignore[import-untyped]
    except ImportError:
        return None
    start = time.perf_counter()
    if shape == "jsonl":
        frame = pd.read_json(path, lines=True)
    else:
        frame = pd.read_csv(path, sep=r"\s*\|\s*|\s+", engine="python", header=None)
        frame = frame.iloc[:, [1, 3]].set_axis(["step", "loss"], axis=1)
    frame["loss"].rolling(50).median()
    return time.perf_counter() - start


def _file(workdir: Path, shape: str) -> Path:
    return workdir / ("train.jsonl" if shape == "jsonl" else f"{shape.replace(' ', '_')}.log")


def measure_rate(workdir: Path, shape: str, rows: int, *, baseline: bool) -> dict[str, float]:
    path = _file(workdir, shape)
    size = write_shape_log(path, rows, shape)
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    runs = read_logs(path)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    got = sum(len(r) for r in runs)
    assert got >= rows * 0.99, (shape, got, rows)
    out = {"mb": size / 1e6, "wall": wall, "cpu": cpu, "rate": rows / wall, "rate_cpu": rows / cpu}
    if baseline:
        t0 = time.perf_counter()
        analyze(runs)
        out["analysis"] = time.perf_counter() - t0
        base = pandas_baseline(path, shape)
        if base is not None:
            out["pandas"] = base
    path.unlink()
    return out


def measure_memory(workdir: Path, shape: str, rows: int) -> tuple[float, float, float]:
    """(file MB, MB of the columns returned, peak MB traced while reading)."""
    path = _file(workdir, shape)
    size = write_shape_log(path, rows, shape)
    gc.collect()
    tracemalloc.start()
    runs = read_logs(path)
    _now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    columns = sum(r.steps.nbytes + sum(c.nbytes for c in r.columns.values()) for r in runs)
    columns += sum(
        sum(m.nbytes for m in r.present.values()) + (r.wall.nbytes if r.wall is not None else 0) for r in runs
    )
    path.unlink()
    return size / 1e6, columns / 1e6, peak / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000, help="lines per shape (default 2,000,000)")
    parser.add_argument("--shapes", help="comma-separated subset of: " + ", ".join(SHAPES))
    parser.add_argument("--memory", action="store_true", help="also measure peak memory at N/4 and N/2 rows")
    parser.add_argument("--keep", type=Path, help="write the logs here (deleted after each shape anyway)")
    args = parser.parse_args()
    shapes = [s.strip() for s in args.shapes.split(",")] if args.shapes else list(SHAPES)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="trainprobe-bench-logs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.rows:,} lines per shape in {workdir}; {os.cpu_count()} CPUs, load average {load:.1f} "
        "(wall-clock rates drop when other work shares the CPUs; CPU-second rates do not)\n"
    )
    print(f"{'shape':<18} {'MB':>6} {'M lines/s':>10} {'per CPU-s':>10}  goal >= 1 M/s")
    try:
        for shape in shapes:
            got = measure_rate(workdir, shape, args.rows, baseline=shape in ("pipes", "jsonl"))
            verdict = "met" if max(got["rate"], got["rate_cpu"]) >= 1e6 else "MISSED"
            rates = f"{got['rate'] / 1e6:10.2f} {got['rate_cpu'] / 1e6:10.2f}"
            print(f"{shape:<18} {got['mb']:6.0f} {rates}  {verdict}")
            if "analysis" in got:
                total = got["wall"] + got["analysis"]
                print(
                    f"{'':<18} analysis {got['analysis']:.2f} s: parse + analysis = "
                    f"{total / got['wall']:.2f}x parsing alone (goal <= 2x)"
                    + (
                        f"; pandas read + rolling(50).median {got['pandas']:.2f} s, trainprobe total "
                        f"{got['pandas'] / total:.2f}x faster"
                        if "pandas" in got
                        else "; pandas not installed: no baseline (pip install pandas)"
                    )
                )
        if args.memory:
            head = f"{'rows':>10} {'file MB':>8} {'columns MB':>11} {'peak MB':>8} {'above columns':>14}"
            print(f"\n{'shape':<18} {head}")
            for shape in shapes:
                for rows in (args.rows // 4, args.rows // 2):
                    mb, cols, peak = measure_memory(workdir, shape, rows)
                    print(f"{shape:<18} {rows:>10,} {mb:8.0f} {cols:11.1f} {peak:8.1f} {peak - cols:14.1f}")
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
