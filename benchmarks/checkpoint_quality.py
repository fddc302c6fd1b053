"""How right trainprobe's checkpoint answers are on checkpoints real writers wrote (issue 22), in three parts:

- **tuned**: the writers of issue 22 registered in tests/fixtures/frameworks/catalog.py (also tested one by
  one in tests/checkpoint/test_more_writers.py); the wrong answers are listed;
- **held-out**: the writers under tests/fixtures/frameworks/held_out/ (30% of issue 22's writers, drawn once:
  held_out/SPLIT.md), scored only here and printed only as counts by rule, so no rule is tuned on them;
- **first set**: the frameworks tested before (HF Trainer, Lightning, accelerate, DeepSpeed ZeRO-1/2, DCP,
  plain torch), healthy units, expected answers from tests/checkpoint/test_real_frameworks.py's tables.

Every unit (not the run directories) is asked what ``trainprobe scan`` and ``check`` answer, through the same
library calls (``trainprobe.checkpoint.scan``, ``check_paths``): scan's verdict, check's verdict and, for a
healthy unit, the step. Each is an answer, right when it is among the accepted ones of the unit's ground
truth (``facts["truth"]["expected"]``, tests/fixtures/frameworks/truth.py). Also counted: damaged units
called healthy (clean / consistent / unknown), and time: scan + check of a unit against a baseline measured in
the same run on the same bytes, ``torch.load(weights_only=False)`` of each of its files (what a user's check
script does first), as a ratio (median over units).

Units are generated once and cached: the tuned and first set in pytest's cache (.pytest_cache/d/
framework-units, shared with the tests), the held-out set beside it (checkpoint-quality-held-out/<key>).

    .venv/bin/python benchmarks/checkpoint_quality.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
sys.path.insert(0, str(TESTS))

HEALTHY = {"clean", "consistent", "unknown"}


@dataclass(frozen=True)
class Wrong:
    unit: str
    question: str
    expected: Any
    got: Any
    rule: str


def _rule(question: str, expected: list[str] | Any, got: Any, damaged: bool) -> str:
    """Which of the issue's rules a wrong answer breaks (the held-out part is printed by these only)."""
    if question == "step":
        return "step: the writer's own step"
    if damaged and got in HEALTHY:
        return "damaged called healthy"
    if got == "suspicious":
        return "suspicious where torch loads it"
    if got == "torn" and not damaged:
        return "healthy called torn"
    if got == "consistent":
        return "consistent without the evidence"
    if not damaged and got == "unknown":
        return "unknown where evidence was there"
    if damaged:
        return "damage given the wrong name"
    return f"other ({got} for {expected})"


def answers(path: Path) -> tuple[Any, Any, Any]:
    """(scan verdict, check verdict, step) that scan and check give for the unit at ``path``: the one unit
    they find there (the directory, or the one file of a save_pretrained directory they take as the unit); a
    unit found as several (or none) is answered ``not one unit``."""
    from trainprobe.checkpoint import scan
    from trainprobe.checkpoint.check import check_paths

    scanned = [u for u in scan([str(path)]).units if Path(u.path).is_relative_to(path)]
    checked = [r for r in check_paths([str(path)]).results if Path(r.path).is_relative_to(path)]
    if len(scanned) != 1 or len(checked) != 1:
        return "not one unit", "not one unit", None
    return scanned[0].verdict, checked[0].verdict, checked[0].step


def _baseline(path: Path) -> None:
    import torch

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    from safetensors.torch import load_file

    for file in files:
        # a damaged copy raises: the read was still paid for
        with contextlib.suppress(Exception):
            if file.suffix == ".safetensors":
                load_file(str(file))
            elif file.suffix in (".pt", ".pth", ".bin", ".ckpt", ".tar", ".distcp"):
                torch.load(file, weights_only=False, map_location="cpu")
            else:
                file.read_bytes()


def _timed(function: Any, path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(path)
        times.append(time.perf_counter() - start)
    return min(times)


def score(root: Path, units: list[dict[str, Any]], expected_of: Any, repeat: int) -> dict[str, Any]:
    wrong: list[Wrong] = []
    total = damaged_healthy = 0
    ratios, seconds = [], []
    for unit in units:
        if unit["kind"] == "run":
            continue
        path = root / unit["path"]
        expected, damaged = expected_of(unit)
        got = dict(zip(("scan", "check", "step"), answers(path), strict=True))
        for question in ("scan", "check", "step"):
            if question not in expected:
                continue
            total += 1
            accepted = expected[question]
            right = got[question] in accepted if question != "step" else got[question] == accepted
            if not right:
                rule = _rule(question, accepted, got[question], damaged)
                wrong.append(Wrong(unit["name"], question, accepted, got[question], rule))
        damaged_healthy += int(damaged and (got["scan"] in HEALTHY or got["check"] in HEALTHY))
        spent = _timed(answers, path, repeat)
        base = _timed(_baseline, path, repeat)
        seconds.append(spent)
        ratios.append(spent / base if base else float("inf"))
    return {
        "answers": total,
        "right": total - len(wrong),
        "wrong": wrong,
        "damaged_called_healthy": damaged_healthy,
        "units": len(seconds),
        "median_ratio": statistics.median(ratios) if ratios else 0.0,
        "max_seconds": max(seconds) if seconds else 0.0,
    }


def truth_expected(unit: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    truth = unit["facts"]["truth"]
    return truth["expected"], truth["damage"] is not None


def first_set_expected(unit: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    from checkpoint.test_real_frameworks import SUSPICIOUS, UNKNOWN

    if unit["name"] in SUSPICIOUS:
        return {"scan": ["suspicious"], "check": ["suspicious"]}, False
    check = "unknown" if unit["name"] in UNKNOWN else "consistent"
    return {"scan": ["clean"], "check": [check], "step": unit["step"]}, False


def held_out_units() -> tuple[Path, dict[str, Any]]:
    from fixtures.frameworks.held_out.catalog import cache_key

    base = REPO / ".pytest_cache" / "d" / "checkpoint-quality-held-out"
    target = base / cache_key()
    if not (target / "manifest.json").exists():
        env = {**os.environ, "PYTHONPATH": str(TESTS)}
        argv = [sys.executable, "-m", "fixtures.frameworks.held_out.run", "all", str(target)]
        subprocess.run(argv, check=False, env=env, timeout=1500)
        for stale in base.iterdir():
            if stale.is_dir() and stale != target:
                subprocess.run(["rm", "-rf", str(stale)], check=False)
    return target, json.loads((target / "manifest.json").read_text())


def _report(part: str, result: dict[str, Any], list_wrong: bool) -> None:
    share = 100 * result["right"] / result["answers"] if result["answers"] else 0.0
    print(
        f"{part:10} {result['right']:4} of {result['answers']:4} answers right ({share:5.1f}%), "
        f"{len(result['wrong'])} wrong, damaged called healthy: {result['damaged_called_healthy']}, "
        f"{result['units']} units, time per unit {result['median_ratio']:.2f}x torch.load of its files "
        f"(median; slowest unit {result['max_seconds']:.2f} s)"
    )
    if list_wrong:
        for w in result["wrong"]:
            print(f"    {w.unit}: {w.question} expected {w.expected}, got {w.got}  [{w.rule}]")
    else:
        for rule, count in sorted(collections.Counter(w.rule for w in result["wrong"]).items()):
            print(f"    {count:3}  {rule}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timing repeats per unit (min is kept)")
    args = parser.parse_args()
    from fixtures.frameworks.catalog import GENERATORS
    from fixtures.frameworks.plugin import load_or_generate

    units = load_or_generate(REPO / ".pytest_cache" / "d" / "framework-units")
    generators = units.manifest["generators"]
    failed = {n: g["error"][-800:] for n, g in generators.items() if g["status"] == "failed"}
    failed_names = set(failed)
    tuned = [u for u in units.manifest["units"] if "truth" in u["facts"]]
    tuned_generators = {u["generator"] for u in tuned}
    first = [
        u
        for u in units.manifest["units"]
        if u["generator"] not in tuned_generators and u["generator"] in {g.name for g in GENERATORS}
    ]
    held_root, held = held_out_units()
    failed |= {f"held-out/{n}": "failed" for n, g in held["generators"].items() if g["status"] == "failed"}
    for name, error in failed.items():
        print(f"generator {name} FAILED: {error if name in failed_names else ''}")
    _report("tuned", score(units.root, tuned, truth_expected, args.repeat), list_wrong=True)
    _report("held-out", score(held_root, held["units"], truth_expected, args.repeat), list_wrong=False)
    _report("first set", score(units.root, first, first_set_expected, args.repeat), list_wrong=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
