"""``scan``, ``check`` and ``diff --help`` state the exit codes of trainprobe.checkpoint.verdict exactly: the
text is written in cli/_verdicts.py (the help must not import numpy), the rule in verdict.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from trainprobe.checkpoint import verdict as V


def _codes(help_text: str) -> dict[int, str]:
    """Exit code -> what the help says it means (the indented block after "Exit codes")."""
    block = help_text.split("Exit codes", 1)[1].split("\n\n", 1)[0]
    found: dict[int, str] = {}
    for m in re.finditer(r"^  (\d)  (.*?)(?=^  \d  |\Z)", block, re.M | re.S):
        found[int(m.group(1))] = " ".join(m.group(2).split())
    return found


@pytest.mark.parametrize("command", ["scan", "check", "diff"])
def test_help_states_the_one_exit_code_rule(cli: Any, command: str) -> None:
    codes = _codes(cli(command, "--help").stdout)
    assert set(codes) == {0, 1, 2}
    by_code = {0: [], 1: [], 2: []}  # type: dict[int, list[str]]
    for verdict in V.ORDER:
        by_code[V.exit_code([verdict])].append(verdict)
    for code, verdicts in by_code.items():
        for verdict in verdicts:
            assert re.search(rf"\b{verdict}\b", codes[code]), (command, code, verdict, codes[code])
            others = [c for c in codes if c != code]
            assert not any(re.search(rf"\b{verdict} \(", codes[c]) for c in others), (command, verdict)
    assert "wins over unreadable" in codes[1]  # exit_code(["corrupt", "unreadable"]) == 1
    assert V.exit_code([V.CORRUPT, V.UNREADABLE]) == 1
    assert "usage error" in codes[2]
