"""Mutation fuzzing of every checkpoint reader, on checkpoints torch (and safetensors, and the real
frameworks) wrote: every case ends in exit 0, 1 or 2, without a traceback, within the time and memory limits.

``TRAINPROBE_FUZZ_CASES`` sets the cases per seed (default :data:`CASES`, sized for CI's 2 cores: the whole
test takes about two minutes there); ``TRAINPROBE_FUZZ_START`` the first case number, to explore further. A
failure names its seed and case number (reproducible: the mutations come from ``random.Random("seed:n")``)
and keeps the file; a fixed one becomes a case in ``cases/``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hostile.fuzz import Campaign, Seed

pytest.importorskip("torch")

CASES = int(os.environ.get("TRAINPROBE_FUZZ_CASES", "250"))
START = int(os.environ.get("TRAINPROBE_FUZZ_START", "0"))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[Seed]:
    from hostile.fuzz_seeds import write_seeds

    return write_seeds(tmp_path_factory.mktemp("seeds"))


def test_fuzz_readers(seeds: list[Seed], tmp_path: Path) -> None:
    campaign = Campaign(seeds, CASES, tmp_path, start=START)
    failures = campaign.run()
    assert campaign.cases_run == CASES * len(seeds)
    assert not failures, f"{len(failures)} failing case(s):\n\n" + "\n\n".join(
        f.describe() for f in failures[:8]
    )


def test_fuzz_framework_checkpoints(framework_units: Any, tmp_path: Path) -> None:
    from hostile.fuzz_seeds import framework_seeds

    seeds = framework_seeds(framework_units)
    if not seeds:
        pytest.skip("no framework checkpoint was generated (pip install -e '.[test]')")
    count = max(1, CASES // 5)
    campaign = Campaign(seeds, count, tmp_path, start=START)
    failures = campaign.run()
    assert campaign.cases_run == count * len(seeds)
    assert not failures, f"{len(failures)} failing case(s):\n\n" + "\n\n".join(
        f.describe() for f in failures[:8]
    )
