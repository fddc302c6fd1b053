"""Every hostile case of ``cases/`` through the real program: ``scan``, ``scan --json``, ``check``, ``diff``
and ``triage``, each in its own process under a 2 GiB address-space limit.

Each case is one file: ``CASE`` (what each command must exit with, words ``scan`` must print, the globals it
must name) and ``build(folder, sentinel)``, which writes the hostile file from raw opcodes and bytes and
returns its path. Every command must end with its expected exit code, without a traceback, within the
case's time and memory; ``scan --json`` must print valid JSON; a payload's sentinel file must not exist.
Memory is held to issue 19's rule too: peak RSS within the command's own baseline (on a tiny healthy file,
measured in this run) plus twice the bytes of the case's files, whatever a header or an opcode claims.
A new case is a new file."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hostile.craft import CASES_DIR, COMMANDS, Case, load_case
from hostile.limits import Outcome, baseline_rss_mb, data_mb, memory_budget_mb, run_trainprobe


def argv_of(command: str, target: Path, run_dir: Path) -> list[str]:
    return {
        "scan": ["scan", str(target)],
        "scan --json": ["scan", "--json", str(target)],
        "check": ["check", str(target)],
        "diff": ["diff", str(target), str(target)],  # its own tensors compared: every one is read
        "triage": ["triage", str(run_dir)],
    }[command]


@pytest.mark.parametrize("case_file", sorted(CASES_DIR.glob("*.py")), ids=lambda p: p.stem)
def test_hostile_case(case_file: Path, tmp_path: Path) -> None:
    case = load_case(case_file)
    expect: Case = case.CASE
    sentinel = tmp_path / "pwned"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = case.build(run_dir, sentinel)

    commands = [*COMMANDS, "scan --json"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes: dict[str, Outcome] = dict(
            zip(
                commands,
                pool.map(
                    lambda c: run_trainprobe(argv_of(c, target, run_dir)),
                    commands,
                ),
                strict=True,
            )
        )
    problems = []
    for command, out in outcomes.items():
        want = expect.exit_code(command.split()[0])
        baseline = baseline_rss_mb(command, lambda p, c=command: argv_of(c, p, p.parent))
        # diff opens its two inputs (here the same file twice) side by side
        kept = (2 if command == "diff" else 1) * (data_mb(run_dir) + expect.kept_mb)
        budget = min(expect.max_rss_mb, memory_budget_mb(baseline, kept))
        if out.traceback or out.code != want or not out.within(expect.seconds) or out.max_rss_mb > budget:
            limits = (
                f"exit {want} within {expect.seconds}s of CPU and {budget:.0f} MB "
                f"(baseline {baseline:.0f} MB + "
                f"2 x {kept:.1f} MB of data, at most the case's {expect.max_rss_mb:.0f} MB)"
            )
            problems.append(f"{command}: expected {limits}\n{out.describe()}")
    assert not problems, "\n\n".join(problems)
    said = outcomes["scan"].stdout + outcomes["scan"].stderr
    assert expect.says in said, said
    for name in expect.globals:
        assert f"suspicious global {name}" in said, said
    json.loads(outcomes["scan --json"].stdout)  # valid JSON, whatever the file held
    assert not sentinel.exists(), "a payload ran"
