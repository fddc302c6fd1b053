"""One contract for every command: the --on group and the output group are declared once, with the
library's defaults, and --json's help names the document's real schema_version."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import trainprobe.tasks
from trainprobe.cli import COMMANDS
from trainprobe.cli._where import CONNECT_TIMEOUT_S, PARALLEL
from trainprobe.remote import api, fanout, probe, session, slurm_jobs
from trainprobe.remote.fleet_result import DEFAULT_PARALLEL

HEADER = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
TENSOR = len(HEADER).to_bytes(8, "little") + HEADER + b"\x00\x00\x80\x3f\x00\x00\xc0\x7f"  # 1.0, NaN
REMOTE = ("scan", "check", "diff", "logs", "triage", "watch", "run", "probe")


def help_of(cli: Any, command: str) -> str:
    got = cli(command, "--help")
    assert got.exit_code == 0
    return " ".join(got.stdout.split())


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ("mcp", "demo")])
def test_every_command_has_json_and_quiet(cli: Any, command: str) -> None:
    text = help_of(cli, command)
    assert "--json" in text
    assert "-q, --quiet" in text


@pytest.mark.parametrize("command", REMOTE)
def test_every_remote_command_has_one_connect_timeout_default_and_a_targets_file(
    cli: Any, command: str
) -> None:
    text = help_of(cli, command)
    assert "--config FILE" in text
    connect = "--connect-timeout SECONDS Seconds to connect, authenticate and get through login scripts"
    assert f"{connect} (default: {CONNECT_TIMEOUT_S:g})" in text
    if command != "probe":  # probe's targets are its words
        assert "--on TARGET" in text


def test_the_cli_defaults_are_the_librarys() -> None:
    assert CONNECT_TIMEOUT_S == session.CONNECT_TIMEOUT_S
    assert PARALLEL == DEFAULT_PARALLEL
    functions = [api.run, api.call, fanout.run_fleet, fanout.call_fleet, session.execute, probe.probe]
    functions += [probe.probe_fleet, slurm_jobs.expand_slurm_jobs]
    functions += [
        getattr(trainprobe.tasks, name)
        for name in trainprobe.tasks.__all__
        if name.endswith(("_on", "_on_fleet", "_sharded"))
    ]
    functions += [trainprobe.tasks.RemoteTask.on, trainprobe.tasks.RemoteTask.on_fleet]
    assert len(functions) > 12
    for function in functions:
        parameter = inspect.signature(function).parameters.get("connect_timeout")
        if parameter is None:  # **limits, passed on to RemoteTask.on/on_fleet (checked here) or collect_on
            continue
        assert parameter.default == CONNECT_TIMEOUT_S, function.__qualname__
    rounds = trainprobe.tasks.sharded._Rounds()  # the sharded scan's and check's defaults
    assert (rounds.connect_timeout, rounds.parallel) == (CONNECT_TIMEOUT_S, PARALLEL)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "a.safetensors").write_bytes(TENSOR)
    (tmp_path / "b.safetensors").write_bytes(TENSOR)
    rows = "".join(f'{{"step": {s}, "loss": {6.0 if s == 130 else 1.0}}}\n' for s in range(200))
    (tmp_path / "train.jsonl").write_text(rows)
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.jsonl").write_text(rows)
    (run / "step_100.safetensors").write_bytes(TENSOR)
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ["scan", "a.safetensors"],
        ["check", "a.safetensors"],
        ["diff", "a.safetensors", "b.safetensors"],
        ["logs", "train.jsonl"],
        ["triage", "run"],
    ],
    ids=lambda args: args[0],
)
def test_the_json_help_names_the_documents_schema_version(
    cli: Any, files: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(files)
    document = json.loads(cli(*args, "--json").stdout)
    versions = re.findall(r"--json .*?schema_version (\d+)", help_of(cli, args[0]))
    assert versions[:1] == [str(document["schema_version"])]


@pytest.mark.parametrize(
    ("args", "verdict", "code"),
    [
        (["scan", "a.safetensors"], "nonfinite", 1),
        (["check", "a.safetensors"], "nonfinite", 1),
        (["diff", "a.safetensors", "b.safetensors"], "nonfinite", 1),
        (["logs", "train.jsonl"], "problems", 1),
        (["triage", "run"], "problems", 1),
    ],
    ids=lambda a: a[0] if isinstance(a, list) else str(a),
)
def test_every_document_has_the_shared_keys(
    cli: Any, files: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], verdict: str, code: int
) -> None:
    """docs/json.md: schema_version 3, a verdict, the exit code the command exits with, a summary of counts,
    and checkpoint units under ``units``."""
    monkeypatch.chdir(files)
    ran = cli(*args, "--json")
    document = json.loads(ran.stdout)
    assert document["schema_version"] == 3
    assert (document["verdict"], document["exit_code"], ran.exit_code) == (verdict, code, code)
    assert isinstance(document["summary"], dict)
    assert "checkpoints" not in document
    if args[0] in ("scan", "check", "triage"):
        assert isinstance(document["units"], list)
        assert document["units"]
    if args[0] in ("scan", "check"):  # unit verdict -> count, one rule (checkpoint.verdict.counts)
        assert document["summary"] == {verdict: len(document["units"])}


def test_triage_on_a_name_from_the_targets_file(
    cli: Any, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """triage resolves --on through the targets file as every command does (it said 'unknown hop kind')."""
    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(files / "runs"))
    config = files / "targets.toml"
    config.write_text(f'[targets]\nthere = "local//cd={files}"\n\n[groups]\nboth = ["there", "local"]\n')
    got = cli("triage", "--on", "there", "--config", str(config), "run", "--json")
    assert got.exit_code == 1, got.stderr  # the NaN in step_100
    report = json.loads(got.stdout)
    assert report["target"] == f"local//cd={files}"
    assert report["exit_code"] == 1
    fleet = cli("triage", "--on", "both", "--config", str(config), "run")
    assert fleet.exit_code == 2
    assert "triage diagnoses one run directory on one target; both names 2 targets" in fleet.stderr
