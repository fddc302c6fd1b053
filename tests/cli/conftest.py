"""``cli``: the command line run in this process through :func:`trainprobe.cli.main`, output captured.

Tests that need the real program (its start-up, its pipes, signals) run ``trainprobe`` in a subprocess
instead; this is for the many checks of what a command prints and how it exits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest

from trainprobe.cli import main


class Result(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    def invoke(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke
