"""A fleet's exit code comes from each target's report, in the library as on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainprobe.remote.fleet_result import FleetResult, Outcome
from trainprobe.tasks import FleetReports, scan_on_fleet

from .fleet_files import nan_safetensors


def fleet_of(*statuses: str) -> FleetResult:
    return FleetResult([Outcome(f"t{i}", s, 0 if s == "ok" else 255) for i, s in enumerate(statuses)])


@pytest.mark.parametrize(
    ("statuses", "codes", "expected"),
    [
        (("ok", "ok"), [0, 0], 0),
        (("ok", "ok"), [1, 0], 1),  # a finding on one target: the fleet found something
        (("ok", "ok"), [2, 0], 2),  # one target could not read everything, nothing found
        (("ok", "ok"), [2, 1], 1),  # a finding wins over unreadable
        (("ok", "unreachable"), [2], 1),  # a target that could not run is a failure
    ],
)
def test_the_fleet_code_is_the_worst_report_a_finding_or_a_failure_first(
    statuses: tuple[str, ...], codes: list[int], expected: int
) -> None:
    fleet = fleet_of(*statuses)
    reports: dict[str, dict[str, Any]] = {f"t{i}": {"exit_code": c} for i, c in enumerate(codes)}
    got = FleetReports(fleet, reports)
    assert got.exit_code == expected
    assert got.to_json()["exit_code"] == expected
    assert [t["result"] for t in got.to_json()["targets"]] == [
        reports.get(f"t{i}") for i in range(len(statuses))
    ]


def test_exit_code_by_applies_a_commands_rule() -> None:
    got = FleetReports(fleet_of("ok", "ok"), {"t0": {"exit_code": 0}, "t1": {"exit_code": 0, "strict": 1}})
    assert got.exit_code_by(lambda r: int(r.get("strict", r["exit_code"]))) == 1


def test_scan_on_a_fleet_whose_targets_find_nan_exits_1(tmp_path: Path) -> None:
    """Two local targets, each scanning a file with a NaN: the library says 1, as the CLI does."""
    nan_safetensors(tmp_path / "f.safetensors")
    fleet = scan_on_fleet(["local//cd=" + str(tmp_path), f"local//cd={tmp_path}//env=X=1"], ["f.safetensors"])
    assert [o.status for o in fleet.fleet.outcomes] == ["ok", "ok"]
    assert fleet.fleet.exit_code == 0  # every target ran...
    assert fleet.exit_code == 1  # ...and each found a NaN
    assert fleet.to_json()["exit_code"] == 1
