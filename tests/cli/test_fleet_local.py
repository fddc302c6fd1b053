"""Fleet commands on two local targets (no sshd needed): one exit rule, one document, one renderer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

HEADER = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'


@pytest.fixture
def two_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Two local targets, each in a directory holding ``f.safetensors`` with a NaN and a log with a spike."""
    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path / "runs"))
    targets = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        tensor = len(HEADER).to_bytes(8, "little") + HEADER + b"\x00\x00\x80\x3f\x00\x00\xc0\x7f"
        (folder / "f.safetensors").write_bytes(tensor)
        rows = "".join(f'{{"step": {s}, "loss": {60.0 if s == 130 else 1.0}}}\n' for s in range(200))
        (folder / "train.jsonl").write_text(rows)
        targets.append(f"local//cd={folder}")
    return targets[0], targets[1]


def test_scan_on_two_targets_that_find_nan_exits_1(cli: Any, two_dirs: tuple[str, str]) -> None:
    a, b = two_dirs
    got = cli("scan", "--on", a, "--on", b, "f.safetensors")
    assert got.exit_code == 1, got.output
    assert got.stdout.count("✗ NON-FINITE") == 2
    assert f"── {a}" in got.stdout
    assert f"── {b}" in got.stdout
    data = json.loads(cli("scan", "--on", a, "--on", b, "f.safetensors", "--json").stdout)
    assert data["exit_code"] == 1
    assert [t["result"]["exit_code"] for t in data["targets"]] == [1, 1]


def test_logs_on_a_fleet_follows_the_fleet_rule_and_carries_each_exit_code(
    cli: Any, two_dirs: tuple[str, str]
) -> None:
    a, b = two_dirs
    found = cli("logs", "--on", a, "--on", b, "train.jsonl", "--json")
    assert found.exit_code == 1, found.output
    data = json.loads(found.stdout)
    assert data["exit_code"] == 1
    assert [t["result"]["exit_code"] for t in data["targets"]] == [1, 1]
    quiet = cli("logs", "--on", a, "--on", b, "train.jsonl", "--json", "--fail-on", "never")
    assert quiet.exit_code == 0, quiet.output
    assert [t["result"]["exit_code"] for t in json.loads(quiet.stdout)["targets"]] == [0, 0]
    missing = cli("logs", "--on", a, "--on", b, "nothere.jsonl")
    assert missing.exit_code == 1  # a target that could not read its log is a failure of the fleet


def test_the_fleet_exit_codes_help_is_on_every_fleet_command(cli: Any) -> None:
    from trainprobe.cli._verdicts import FLEET_EXIT_CODES

    for command in ("scan", "check", "diff", "logs"):
        text = " ".join(cli(command, "--help").stdout.split())
        assert " ".join(FLEET_EXIT_CODES.split()) in text, command
