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


SHIPPED = """\
import sys


def how_it_came():
    importer = sys.meta_path[0]
    return {"compiled_here": __name__ in importer.codes, "python": sys.version.split()[0]}
"""


def _shipped_function(tmp_path: Path) -> object:
    import importlib
    import sys

    (tmp_path / "tp_how_it_came.py").write_text(SHIPPED)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("tp_how_it_came").how_it_came
    finally:
        sys.path.remove(str(tmp_path))


def test_shipped_modules_and_the_agent_come_as_code_to_the_same_python(tmp_path: Path) -> None:
    import sys

    function = _shipped_function(tmp_path)
    answer = call(f"local//python={sys.executable}", function)
    assert answer["compiled_here"] is True


def test_another_python_version_gets_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The far side reports another bytecode magic number: discovery, agent and modules go as source."""
    import sys

    from trainprobe.remote import far_code, session

    monkeypatch.setattr(far_code, "LOCAL_MAGIC", b"\0\0\0\0")
    monkeypatch.setattr(session, "LOCAL_MAGIC", b"\0\0\0\0")
    answer = call(f"local//python={sys.executable}", _shipped_function(tmp_path))
    assert answer["compiled_here"] is False


@pytest.mark.parametrize("version", ["3.7", "3.13"])
def test_a_far_python_of_another_version_runs_the_same_call(tmp_path: Path, version: str) -> None:
    """Real interpreters of the oldest supported and a newer minor version, where this machine has them."""
    import glob

    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    if not found:
        pytest.skip(f"no Python {version} here (pyenv)")
    answer = call(f"local//python={found[-1]}", _shipped_function(tmp_path))
    assert answer == {"compiled_here": False, "python": answer["python"]}
    assert answer["python"].startswith(version + ".")
