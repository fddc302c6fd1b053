"""``missing_extra``: the one wording of "install this extra", and a command that hits it exits 2 with it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from metrics.synthetic import write_seed_story
from trainprobe.errors import MissingExtraError, UsageError, missing_extra


def test_missing_extra_names_the_extra_and_is_a_usage_error() -> None:
    error = missing_extra("matplotlib", extra="plot", needed_by="--png")
    assert isinstance(error, MissingExtraError)
    assert isinstance(error, UsageError)
    assert error.exit_code == 2
    assert (error.module, error.extra) == ("matplotlib", "plot")
    assert str(error) == "--png needs matplotlib, which is not installed — pip install 'trainprobe[plot]'"


def test_png_without_matplotlib_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trainprobe.cli import main

    log = write_seed_story(tmp_path / "train.log", 300)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it now raises ImportError
    code = main(["logs", str(log), "--png", str(tmp_path / "out.png"), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--png needs matplotlib, which is not installed — pip install 'trainprobe[plot]'" in err
    assert not (tmp_path / "out.png").exists()


def test_writer_without_torch_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainprobe.save.writer import import_torch

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingExtraError, match=r"CheckpointWriter needs torch.*trainprobe\[torch\]"):
        import_torch()
