"""``call(..., modules=...)``: a function that imports beyond its own subpackage runs on a Python that has
only numpy (no trainprobe installed) once the other subpackages are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.errors import RemoteExceptionError, UsageError
from trainprobe.remote import call
from trainprobe.remote.api import modules_for, modules_named
from trainprobe.triage.collect import collect


def test_call_ships_the_named_subpackages_too(numpy_venv: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_text("step,loss\n1,2.0\n2,1.5\n3,1.4\n")
    target = f"local//python={numpy_venv}"
    with pytest.raises(RemoteExceptionError, match=r"No module named 'trainprobe\.checkpoint'"):
        call(target, collect, str(run_dir), need=["numpy"])
    remote = call(
        target, collect, str(run_dir), need=["numpy"], modules=["trainprobe.checkpoint", "trainprobe.metrics"]
    )
    local = collect(str(run_dir))
    remote.pop("seconds"), local.pop("seconds")
    assert remote == local
    assert remote["logs"]["series"]["run"]["loss"]["values"] == [2.0, 1.5, 1.4]


def test_what_ships_for_a_name() -> None:
    _, own = modules_for(collect)
    assert "trainprobe.metrics" not in {m.name for m in own}
    _, more = modules_for(collect, ["trainprobe.metrics.analyze"])  # a module inside: its whole subpackage
    names = {m.name for m in more}
    assert {"trainprobe", "trainprobe.errors", "trainprobe.triage.collect", "trainprobe.metrics"} <= names
    assert {m.name for m in own} < names
    assert len(names) == len(more)  # each once
    assert [m.name for m in modules_named(["json.decoder"])] == ["json.decoder", "json"]
    assert [m.is_package for m in modules_named(["json.decoder"])] == [False, True]
    with pytest.raises(UsageError, match="cannot ship module 'no_such_module_here'"):
        modules_named(["no_such_module_here"])
