"""The fixture's own rules, without generating anything: a missing framework skips with its name, a failed
generator fails, an unknown unit name is an error, and the cache key follows versions and generator source."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.frameworks import catalog
from fixtures.frameworks.build import run_generator
from fixtures.frameworks.catalog import Generator
from fixtures.frameworks.plugin import FrameworkUnits

MANIFEST = {
    "generators": {
        "lightning": {"status": "missing", "missing": ["lightning"], "seconds": 0.0},
        "deepspeed": {"status": "failed", "error": "exit 1\nRuntimeError: gloo", "seconds": 3.0},
        "dcp": {"status": "ok", "seconds": 20.0},
    },
    "units": [
        {
            "name": "dcp/ddp/step_2",
            "path": "dcp/ddp/step_2",
            "framework": "dcp",
            "kind": "dir",
            "step": 2,
            "optimizer": "adam",
            "files": [".metadata", "__0_0.distcp", "__1_0.distcp"],
            "facts": {"world_size": 2},
            "generator": "dcp",
        }
    ],
}


def test_units_by_name(tmp_path: Path) -> None:
    units = FrameworkUnits(tmp_path, MANIFEST)
    assert units.path("dcp/ddp/step_2") == tmp_path / "dcp/ddp/step_2"
    assert units.unit("dcp/ddp/step_2").files == (".metadata", "__0_0.distcp", "__1_0.distcp")
    assert units.names(framework="dcp") == ["dcp/ddp/step_2"]
    assert units.names(kind="run") == []


def test_missing_framework_skips_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match=r"lightning/run: needs lightning"):
        FrameworkUnits(tmp_path, MANIFEST).unit("lightning/run")


def test_failed_generator_fails(tmp_path: Path) -> None:
    with pytest.raises(
        pytest.fail.Exception, match="generator deepspeed failed:\nexit 1\nRuntimeError: gloo"
    ):
        FrameworkUnits(tmp_path, MANIFEST).unit("deepspeed/zero2")


def test_unknown_unit_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match=r"dcp/ddp/step_9.*known: dcp/ddp/step_2"):
        FrameworkUnits(tmp_path, MANIFEST).unit("dcp/ddp/step_9")


def test_a_generator_whose_framework_is_absent_is_not_run(tmp_path: Path) -> None:
    absent = Generator("absent", "fixtures.frameworks.torch_formats", "generate", ("no_such_framework_xyz",))
    assert run_generator(absent, tmp_path) == {
        "status": "missing",
        "missing": ["no_such_framework_xyz"],
        "seconds": 0.0,
        "units": [],
    }
    assert not list(tmp_path.iterdir())


def test_cache_key_follows_versions_and_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    key, real = catalog.cache_key(), catalog.versions()
    monkeypatch.setattr(catalog, "versions", lambda: {**real, "torch": "0.0"})
    assert catalog.cache_key() != key
    monkeypatch.undo()
    assert catalog.cache_key() == key
    sources = sorted(p.name for p in catalog.HERE.glob("*.py") if p.name not in catalog.NOT_GENERATORS)
    assert "hf_trainer.py" in sources
    assert "plugin.py" not in sources
