"""Damage nobody wrote a fixture for (issue 22: "no damaged checkpoint reported healthy, anywhere"): every
healthy unit of the tuned and first-set framework units (tests/fixtures/frameworks, never the held-out part)
damaged in two general ways, each copy asked what ``trainprobe check`` says:

- **overwritten**: 64 bytes of 0xFF (a bad sector, a stray write) at 3 %, 20 %, 40 %, 60 %, 80 % and 97 % of
  each file of the unit, one copy per file and offset;
- **deleted**: each file of a directory unit removed in turn, one copy per file; only the deletions the
  checkpoint's own loader refuses are damage (a descriptor: ``*.index.json``, ``.metadata``; a shard, a
  rank's partition, a part the unit's index names), the others are listed for reading, not scored.

Prints, per kind, how many damaged copies were called healthy (consistent or unknown; the goal is 0) and each
such copy; ``--json`` the same as JSON. Units come from the tests' cache (.pytest_cache/d/framework-units),
generated on first use.

    .venv/bin/python benchmarks/checkpoint_damage.py [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

HEALTHY = {"consistent", "unknown"}
OFFSETS = (0.03, 0.2, 0.4, 0.6, 0.8, 0.97)
#: files whose absence the unit's own loader refuses (beyond what the check already names as missing)
DESCRIPTORS = (".index.json", ".metadata")


def _healthy_units(root: Path, names: list[str]) -> list[Path]:
    from trainprobe.checkpoint.check import check_paths

    out = []
    for name in names:
        path = root / name
        for unit in check_paths([str(path)]).to_json()["units"]:
            if unit["verdict"] in HEALTHY and "damaged" not in unit["path"]:
                out.append(Path(unit["path"]))
    return sorted(set(out))


def _verdict(copy: Path) -> str:
    from trainprobe.checkpoint.check import check_paths

    verdicts = [u["verdict"] for u in check_paths([str(copy)]).to_json()["units"]] or ["<no unit>"]
    return verdicts[0] if len(set(verdicts)) == 1 else "+".join(sorted(set(verdicts)))


def overwritten(units: list[Path], root: Path) -> tuple[collections.Counter[str], list[str]]:
    from fixtures.frameworks.damage import copy_unit  # the tests' own copier (imports torch)

    counts: collections.Counter[str] = collections.Counter()
    healthy = []
    for unit in units:
        files = [unit] if unit.is_file() else sorted(f for f in unit.rglob("*") if f.is_file())
        for file in files:
            for at in OFFSETS:
                with tempfile.TemporaryDirectory() as tmp:
                    copy = copy_unit(unit, Path(tmp))
                    target = copy if unit.is_file() else copy / file.relative_to(unit)
                    data = bytearray(target.read_bytes())
                    start = int(len(data) * at)
                    data[start : start + 64] = b"\xff" * len(data[start : start + 64])
                    target.write_bytes(bytes(data))
                    verdict = _verdict(copy)
                counts[verdict] += 1
                if verdict in HEALTHY | {"<no unit>"}:
                    healthy.append(f"{file.relative_to(root)} at {at:.0%}: {verdict}")
    return counts, healthy


def deleted(units: list[Path], root: Path) -> tuple[collections.Counter[str], list[str], list[str]]:
    from fixtures.frameworks.damage import copy_unit

    counts: collections.Counter[str] = collections.Counter()
    healthy, optional = [], []
    for unit in (u for u in units if u.is_dir()):
        for file in sorted(f for f in unit.rglob("*") if f.is_file()):
            with tempfile.TemporaryDirectory() as tmp:
                copy = copy_unit(unit, Path(tmp))
                (copy / file.relative_to(unit)).unlink()
                verdict = _verdict(copy)
            line = f"{file.relative_to(root)} deleted: {verdict}"
            if not file.name.endswith(DESCRIPTORS):
                if verdict in HEALTHY:
                    optional.append(line)
                continue
            counts[verdict] += 1
            if verdict in HEALTHY | {"<no unit>"}:
                healthy.append(line)
    return counts, healthy, optional


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    from fixtures.frameworks.plugin import load_or_generate

    units = load_or_generate(REPO / ".pytest_cache" / "d" / "framework-units")
    generators = sorted({u["generator"] for u in units.manifest["units"]})
    healthy_units = _healthy_units(units.root, generators)
    over, over_healthy = overwritten(healthy_units, units.root)
    gone, gone_healthy, optional = deleted(healthy_units, units.root)
    result: dict[str, Any] = {
        "healthy_units": len(healthy_units),
        "overwritten": {"copies": sum(over.values()), "verdicts": dict(over), "called_healthy": over_healthy},
        "deleted_descriptor": {
            "copies": sum(gone.values()), "verdicts": dict(gone), "called_healthy": gone_healthy,
        },
        "deleted_other_still_healthy": optional,
    }  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{len(healthy_units)} healthy units (tuned and first set; the held-out part is never read here)")
    for kind, counts, bad in (
        ("overwritten", over, over_healthy),
        ("deleted descriptor", gone, gone_healthy),
    ):
        total = sum(counts.values())
        shown = ", ".join(f"{n} {v}" for v, n in counts.most_common())
        print(f"{kind:<20} {len(bad)} of {total} damaged copies called healthy   ({shown})")
        for line in bad:
            print(f"    {line}")
    print(f"other deletions still healthy (a loader may not need the file; not scored): {len(optional)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
