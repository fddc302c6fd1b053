"""Benchmark `trainprobe logs DIR` on a directory of very many small logs (issue 19: every case under 10 s).

In one run it writes ``--n`` small logs (default 100,000; ``--rows`` rows each, default 20) of mixed real
shapes — text ``key=value`` lines with a timestamp, JSONL, CSV with a header — into a temporary directory
(100 per sub-directory; deleted afterwards unless ``--keep``), then reports

  - trainprobe: ``trainprobe logs DIR --json --max-logs 0`` (every log read) in a child process — wall
    seconds, logs per second and peak RSS (of the child: ``ru_maxrss`` of the waited-for process);
  - trainprobe as a user runs it, ``trainprobe logs DIR --json``: the first ``conventions.MAX_LOGS`` (2,000)
    read and the rest said not read (exit 2) — the wall seconds the 10 s of issue 19 are about;
  - floor: one Python process that walks the same tree and reads every file and ``json.loads`` its first
    line (``cat`` with a parse) — the least any tool reading each file must pay, measured in the same run so
    the ratio means something on a noisy, shared machine.

The ratio trainprobe/floor is the figure to watch: per-file costs (format sniffing, report building)
show up in it however fast the disk or CPU is that day.

Usage: python benchmarks/logs_many.py [--n 100000] [--rows 20] [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PER_DIR = 100
_SHAPES = ("text", "jsonl", "csv")


def _loss(i: int, row: int) -> float:
    return round(2.5 / (1 + 0.1 * row) + 0.01 * ((i * 7 + row * 13) % 11), 5)


def _text_log(i: int, rows: int) -> str:
    lines = [f"2024-05-01 10:00:00,000 INFO starting run {i}\n"]
    for r in range(rows):
        lines.append(
            f"2024-05-01 10:{r // 60:02d}:{r % 60:02d},000 INFO step={r * 10} loss={_loss(i, r)} "
            f"lr={0.001 * (1 - r / (rows * 2)):.6f} grad_norm={1.0 + 0.01 * (r % 7):.3f}\n"
        )
    return "".join(lines)


def _jsonl_log(i: int, rows: int) -> str:
    return "".join(
        json.dumps({"step": r * 10, "loss": _loss(i, r), "lr": 0.001, "epoch": r // 10}) + "\n"
        for r in range(rows)
    )


def _csv_log(i: int, rows: int) -> str:
    body = "".join(f"{r * 10},{_loss(i, r)},{0.5 + 0.01 * r:.4f}\n" for r in range(rows))
    return "step,train_loss,val_acc\n" + body


def write_logs(root: Path, n: int, rows: int) -> int:
    """``n`` small logs under ``root``, shapes in turn; the bytes written."""
    size = 0
    for i in range(n):
        sub = root / f"run{i // _PER_DIR:05d}"
        if i % _PER_DIR == 0:
            sub.mkdir(parents=True, exist_ok=True)
        shape = _SHAPES[i % len(_SHAPES)]
        if shape == "text":
            name, text = f"train{i}.log", _text_log(i, rows)
        elif shape == "jsonl":
            name, text = f"metrics{i}.jsonl", _jsonl_log(i, rows)
        else:
            name, text = f"progress{i}.csv", _csv_log(i, rows)
        (sub / name).write_text(text)
        size += len(text)
    return size


_FLOOR = """
import json, os, sys
n = 0
for here, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(files):
        with open(os.path.join(here, name), 'rb') as fh:
            first = fh.read().split(b'\\n', 1)[0]
        try:
            json.loads(first)
        except ValueError:
            pass
        n += 1
print(n)
"""


def _child_rss_runner(argv: list[str]) -> tuple[float, int, bytes]:
    """Runs the child through a tiny wrapper so that its own peak RSS (not the largest child's so far) is
    reported."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "s = time.perf_counter() - t\n"
        "sys.stderr.buffer.write(p.stderr[-2000:])\n"
        "sys.stdout.buffer.write(f'{p.returncode} {s} "
        "{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n'.encode() + p.stdout)\n"
    )
    proc = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, check=False)
    head, _, out = proc.stdout.partition(b"\n")
    code, seconds, rss_kb = head.split()
    if int(code) not in (0, 1, 2):
        sys.stderr.write(proc.stderr.decode(errors="replace"))
        raise SystemExit(f"{argv[:4]} exited {int(code)}")
    return float(seconds), int(rss_kb) * 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="number of logs (default 100000)")
    parser.add_argument("--rows", type=int, default=20, help="metric rows per log (default 20)")
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    parser.add_argument("--profile", action="store_true", help="print trainprobe's top cProfile entries")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="trainprobe-logs-many-"))
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not any(root.iterdir()):  # a kept directory is reused as it is
            t = time.perf_counter()
            size = write_logs(root, args.n, args.rows)
            print(f"wrote {args.n:,} logs ({size / 1e6:.1f} MB) in {time.perf_counter() - t:.1f} s")
        floor_s, floor_rss, floor_out = _child_rss_runner([sys.executable, "-c", _FLOOR, str(root)])
        prof = ["-m", "cProfile", "-s", "cumtime"] if args.profile else []
        argv = [sys.executable, *prof, "-m", "trainprobe", "logs", str(root), "--json", "--max-logs", "0"]
        tp_s, tp_rss, tp_out = _child_rss_runner(argv)
        bounded_s, bounded_rss, bounded_out = _child_rss_runner(argv[: argv.index("--max-logs")])
        if args.profile:
            text = tp_out.decode(errors="replace")
            print(text[text.find("   Ordered by") :][:6000])
        else:
            report = json.loads(tp_out)
            runs = report.get("runs", report) if isinstance(report, dict) else report
            print(f"trainprobe read {len(runs) if isinstance(runs, list) else '?'} runs")
        n = int(floor_out.split()[0])
        print(
            f"floor (walk + read + json.loads, one process): {floor_s:7.2f} s  {n / floor_s:9,.0f} logs/s  "
            f"peak RSS {floor_rss / 2**20:6.0f} MiB"
        )
        print(
            f"trainprobe logs DIR --json:                    {tp_s:7.2f} s  {n / tp_s:9,.0f} logs/s  "
            f"peak RSS {tp_rss / 2**20:6.0f} MiB"
        )
        print(f"ratio trainprobe / floor: {tp_s / floor_s:.1f}x   ({n:,} logs, {args.rows} rows each)")
        if not args.profile:
            bounded = json.loads(bounded_out)
            said = "; ".join(f"{x['path']}: {x['why']}" for x in bounded.get("not_read", [])[:1])
            print(
                f"trainprobe logs DIR --json (default bound):    {bounded_s:7.2f} s  "
                f"read {len(bounded['runs']):,} of {n:,}, peak RSS {bounded_rss / 2**20:6.0f} MiB; "
                f"not read: {said or 'none'}"
            )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
