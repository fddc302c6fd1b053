"""A log that does not begin where its run did, against the whole log (issue 24, tuned part only).

Users hand over rotated logs (``train.log.1``), the ``tail`` of a running one, a paste of its last screen.
Each single-file case of ``tests/data/real-logs/`` that is read right whole is cut to its last half and its
last fifth; a cut log is read with the same rule as the whole (``trainprobe.metrics.analyze``), and one that
comes out healthy (no warning or error, nothing read in part) must agree with the whole: every (step, value)
of a metric it reports is one the whole log has for that metric, and it reports no metric the whole does
not. The figure: cut logs healthy yet disagreeing, against the cut logs read (the baseline: the whole logs,
read in the same run). The held-out part is never cut here: nobody changing a reader opens it.

    .venv/bin/python benchmarks/logs_cut.py [--list]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from metrics.log_cases import TUNED, cases_in, score_case
from trainprobe.errors import TrainprobeError
from trainprobe.metrics import LogReport, analyze

KEEP = (0.5, 0.2)  # the share of the file's lines kept, from its end


def pairs(report: LogReport) -> dict[str, set[tuple[float, float]]]:
    out: dict[str, set[tuple[float, float]]] = {}
    for run in report.runs:
        for metric in run.metrics:
            got = zip(run.steps, run.columns[metric], strict=True)
            out.setdefault(metric, set()).update((float(s), round(float(v), 9)) for s, v in got if v == v)
    return out


def healthy(report: LogReport) -> bool:
    return (
        not report.partly_read
        and not report.not_read
        and not any(f.severity in ("warning", "error") for f in report.findings)
    )


def disagreements(whole: LogReport, cut: LogReport) -> list[str]:
    full, part = pairs(whole), pairs(cut)
    out = []
    for metric, got in sorted(part.items()):
        if metric not in full:
            out.append(f"{metric}: not a metric of the whole log")
        elif extra := got - full[metric]:
            out.append(f"{metric}: {len(extra)} of {len(got)} (step, value) not in the whole log")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list each cut log that disagrees")
    args = parser.parse_args()
    read = wrong = 0
    listed: list[str] = []
    for case in cases_in(TUNED):
        inputs = json.loads((case / "expected.json").read_text())["inputs"]
        if len(inputs) != 1 or not (case / inputs[0]).is_file() or not score_case(case).read_right:
            continue
        source = case / inputs[0]
        lines = source.read_text(errors="replace").splitlines(keepends=True)
        try:
            whole = analyze([str(source)])
        except TrainprobeError:
            continue  # read right as "no metric rows" (a run that crashed first): nothing to agree with
        for keep in KEEP:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / source.name
                path.write_text("".join(lines[int(len(lines) * (1 - keep)) :]))
                try:
                    cut = analyze([str(path)])
                except TrainprobeError:
                    continue  # nothing left to read: an honest answer
            read += 1
            if healthy(cut) and (said := disagreements(whole, cut)):
                wrong += 1
                listed.append(f"  {case.name} (last {keep:.0%}): {'; '.join(said[:3])}")
    shares = " and ".join(f"{k:.0%}" for k in KEEP)
    print(f"cut logs read: {read} (the last {shares} of each read-right case)")
    print(f"healthy yet disagreeing with the whole log: {wrong} ({wrong / max(read, 1):.0%}; goal 0)")
    if args.list:
        print("\n".join(listed))


if __name__ == "__main__":
    main()
