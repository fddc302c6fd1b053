"""How well the log readers and detectors do on real logs, on the part tuned on and on the held-out part.

``python benchmarks/logs_quality.py`` scores every case of ``tests/data/real-logs/`` (tuned) and of
``tests/data/real-logs-held-out/`` (held out; drawn at random when each case was added, see
tests/data/add_real_logs.py) with the test suite's own rule (tests/metrics/log_cases.py) and prints, per part:
logs read right, anomaly recall, false alarms per healthy log, and logs read wrong yet reported healthy (the
worst answer; the goal is 0). The held-out part prints counts only, never a case: nobody changing a reader
opens it. ``--tuned-cases`` lists what is wrong in each tuned case. ``--json`` prints the figures as JSON.

Goals (issue 24), on the held-out part: read right >= 90%, recall >= 80%, at most 1 false alarm per 10 healthy
logs, 0 misread-but-healthy; the gap between the parts is itself a figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from metrics.log_cases import HELD_OUT, TUNED, Score, cases_in, score_case  # the tests' scoring rule


def figures(scores: list[Score]) -> dict[str, Any]:
    healthy = [s for s in scores if s.healthy_expected]
    anomalies = sum(s.anomalies for s in scores)
    return {
        "cases": len(scores),
        "read_right": sum(s.read_right for s in scores),
        "read_right_share": sum(s.read_right for s in scores) / len(scores) if scores else None,
        "anomalies": anomalies,
        "found": sum(s.found for s in scores),
        "recall": sum(s.found for s in scores) / anomalies if anomalies else None,
        "healthy_logs": len(healthy),
        "false_alarms": sum(len(s.false_warnings) for s in healthy),
        "false_alarms_per_healthy_log": (
            sum(len(s.false_warnings) for s in healthy) / len(healthy) if healthy else None
        ),
        "healthy_logs_with_false_alarms": sum(bool(s.false_warnings) for s in healthy),
        "misread_but_healthy": sum(s.misread_but_healthy for s in scores),
        "all_right": sum(s.ok for s in scores),
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def line(part: str, f: dict[str, Any]) -> str:
    per = f["false_alarms_per_healthy_log"]
    return (
        f"{part:9} {f['cases']:4} cases  read right {f['read_right']}/{f['cases']}"
        f" ({_pct(f['read_right_share'])})"
        f"  recall {f['found']}/{f['anomalies']} ({_pct(f['recall'])})"
        f"  false alarms {f['false_alarms']} on {f['healthy_logs']} healthy logs"
        f" ({'n/a' if per is None else f'{per:.2f}'} per log;"
        f" {f['healthy_logs_with_false_alarms']} logs with any)"
        f"  misread-but-healthy {f['misread_but_healthy']}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--tuned-cases", action="store_true", help="list what is wrong in each tuned case")
    args = ap.parse_args(argv)
    tuned = [score_case(c) for c in cases_in(TUNED)]
    held = [score_case(c) for c in cases_in(HELD_OUT)]
    result = {"tuned": figures(tuned), "held_out": figures(held)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if args.tuned_cases:
        for s in tuned:
            if not s.ok:
                print(f"{s.case}: " + "; ".join([*s.problems, *s.missed, *s.false_warnings])[:400])
        print()
    print(line("tuned", result["tuned"]))
    print(line("held out", result["held_out"]))
    t, h = result["tuned"]["read_right_share"], result["held_out"]["read_right_share"]
    if t is not None and h is not None:
        print(f"gap in read right (tuned - held out): {100 * (t - h):+.0f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
