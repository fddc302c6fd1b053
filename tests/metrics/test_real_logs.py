"""The tuned part of the real public log corpus: every case directory in tests/data/real-logs/ (provenance in
tests/data/real-logs/PROVENANCE.md) is read with ``analyze`` and compared with its ``expected.json``, written
from the data by a person before the readers were changed. The matching rules are :mod:`metrics.log_cases`'s
(shared with ``benchmarks/logs_quality.py``, the only reader of the held-out part). A new case is a new
directory; this test needs no change.

A case the readers get wrong today is listed in ``real_logs_known_wrong.json`` beside this file (case -> what
is wrong): it runs as a strict xfail, so the fix that makes it right must take it off the list. With no cases
in the folder the test fails: a corpus that went missing must not pass as an empty one.
``python tests/metrics/test_real_logs.py [CASE_DIR...]`` prints the score per case and in total.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script: tests/ is not on the path yet
    sys.path.insert(0, str(Path(__file__).parents[1]))
from metrics.log_cases import HELD_OUT, TUNED, Score, cases_in, score_case

CASES = cases_in(TUNED)
KNOWN_WRONG: dict[str, str] = json.loads(
    (Path(__file__).with_name("real_logs_known_wrong.json")).read_text(encoding="utf-8")
)


def test_the_corpus_is_there() -> None:
    assert len(CASES) >= 1, f"no cases in {TUNED}: the real-log corpus is missing"


def test_every_known_wrong_case_exists() -> None:
    names = {c.name for c in CASES}
    assert not set(KNOWN_WRONG) - names, "real_logs_known_wrong.json names cases that are not in the corpus"


def _params() -> list[object]:
    return [
        pytest.param(
            c,
            id=c.name,
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[c.name])]
            if c.name in KNOWN_WRONG
            else [],
        )
        for c in CASES
    ]


@pytest.mark.parametrize("case", _params())
def test_real_log(case: Path) -> None:
    score = score_case(case)
    assert score.ok, "\n".join(
        [*score.problems, *(f"missed anomaly: {m}" for m in score.missed), *score.false_warnings]
    )


def render(scores: list[Score]) -> None:
    for s in scores:
        mark = "ok " if s.ok else "BAD"
        print(
            f"{mark} {s.case}: read {'right' if s.read_right else 'wrong'}, "
            f"anomalies {s.found}/{s.anomalies}, false warnings {len(s.false_warnings)}"
        )
        for line in [*s.problems, *(f"missed {m}" for m in s.missed), *s.false_warnings]:
            print(f"      {line[:300]}")
    print(
        f"\n{sum(s.read_right for s in scores)}/{len(scores)} cases read right, "
        f"{sum(s.found for s in scores)}/{sum(s.anomalies for s in scores)} anomalies found, "
        f"{sum(len(s.false_warnings) for s in scores)} false warnings "
        f"({sum(bool(s.false_warnings) for s in scores)} healthy cases with any)"
    )


def main(argv: list[str]) -> int:
    cases = [Path(a) for a in argv] or CASES
    if any(c.resolve().is_relative_to(HELD_OUT.resolve()) for c in cases):
        print("the held-out part is scored only by benchmarks/logs_quality.py (counts, no per-case lines)")
        return 2
    scores = [score_case(c) for c in cases]
    render(scores)
    return 0 if all(s.ok for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
