"""Benchmark `trainprobe logs` parsing and analysis on a 10-million-line synthetic log, JSONL and text.

In one run: writes both logs into a temporary directory (deleted afterwards), then for each form reports
  - parse: lines per second of trainprobe's reader (format detection included),
  - analysis: the detectors (rolling median/MAD spikes and cliffs, stalls, non-finite, missing, divergence,
    throughput) on the parsed rows, and the total as a multiple of parsing alone,
  - baseline: pandas read (read_json(lines=True) / read_csv) + a rolling(50) median, when pandas is installed.

Goals: >= 1 M lines/s parsed; parse + analysis within 2x of parsing alone.

Usage: python benchmarks/logs.py [--rows 10000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from trainprobe.metrics import analyze, read_logs
from trainprobe.metrics.synthetic import write_uniform_log


def pandas_baseline(path: Path, fmt: str) -> float | None:
    try:
        import pandas as pd  # type: ignore[import-untyped]
    except ImportError:
        return None
    start = time.perf_counter()
    if fmt == "jsonl":
        frame = pd.read_json(path, lines=True)
    else:
        frame = pd.read_csv(path, sep=r"\s*\|\s*|\s+", engine="python", header=None)
        frame = frame.iloc[:, [1, 3]].set_axis(["step", "loss"], axis=1)
    frame["loss"].rolling(50).median()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="trainprobe-bench-logs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.rows:,} rows per log in {workdir}; {os.cpu_count()} CPUs, load average {load:.1f} "
        "(wall-clock rates drop when other work shares the CPUs; CPU-second rates do not)"
    )
    try:
        for fmt, name in (("jsonl", "train.jsonl"), ("text", "train.log")):
            path = workdir / name
            t0 = time.perf_counter()
            size = write_uniform_log(path, args.rows, fmt=fmt)
            gen = time.perf_counter() - t0
            print(
                f"\n[{fmt}] {size / 1e6:,.0f} MB written in {gen:.1f} s; first line: "
                f"{path.open().readline().strip()}"
            )
            t0, c0 = time.perf_counter(), time.process_time()
            (run,) = read_logs(path)
            parse, parse_cpu = time.perf_counter() - t0, time.process_time() - c0
            assert len(run) == args.rows, (len(run), args.rows)
            t0, c0 = time.perf_counter(), time.process_time()
            report = analyze(run)
            detect, detect_cpu = time.perf_counter() - t0, time.process_time() - c0
            total = parse + detect
            rate = args.rows / parse
            print(
                f"  parse     {parse:6.2f} s  {rate / 1e6:5.2f} M lines/s   goal >= 1 M/s: "
                f"{'met' if rate >= 1e6 else 'MISSED'}   (CPU {parse_cpu:.2f} s: "
                f"{args.rows / parse_cpu / 1e6:.2f} M lines per CPU-second)"
            )
            print(f"  analysis  {detect:6.2f} s  (CPU {detect_cpu:.2f} s; {len(report.findings)} findings)")
            print(
                f"  total     {total:6.2f} s  = {total / parse:.2f}x parsing alone   goal <= 2x: "
                f"{'met' if total <= 2 * parse else 'MISSED'}"
            )
            base = pandas_baseline(path, fmt)
            if base is None:
                print("  baseline  skipped: pandas is not installed (pip install pandas to compare)")
            else:
                print(
                    f"  baseline  {base:6.2f} s  pandas read + rolling(50).median; trainprobe total is "
                    f"{base / total:.2f}x faster"
                )
            path.unlink()
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
