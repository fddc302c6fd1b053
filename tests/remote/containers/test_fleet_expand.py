"""Fleet specs → targets, from data/fleet_expansion.toml; and where the targets file is found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainprobe.errors import UsageError
from trainprobe.remote.fleet import FleetConfig, config_path, expand_targets, load_config

tomllib = pytest.importorskip("tomllib", reason="targets files need Python 3.11+ (or tomli)")

DATA = tomllib.loads((Path(__file__).parent / "data" / "fleet_expansion.toml").read_text(encoding="utf-8"))
CONFIG = FleetConfig.from_dict({"targets": DATA["targets"], "groups": DATA["groups"]}, path="targets.toml")


@pytest.mark.parametrize("case", DATA["case"], ids=[c["why"] for c in DATA["case"]])
def test_expansion(case: dict[str, Any]) -> None:
    assert expand_targets(case["specs"], CONFIG) == case["expect"]


@pytest.mark.parametrize(
    "case", DATA["error"], ids=[" ".join(c["specs"]) or "nothing" for c in DATA["error"]]
)
def test_expansion_errors(case: dict[str, Any]) -> None:
    with pytest.raises(UsageError) as info:
        expand_targets(case["specs"], CONFIG)
    assert case["message"] in str(info.value)
    assert info.value.exit_code == 2


def test_config_location(tmp_path: Path) -> None:
    assert config_path({"HOME": "/home/u"}) == Path("/home/u/.config/trainprobe/targets.toml")
    assert config_path({"HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg"}) == Path("/cfg/trainprobe/targets.toml")
    assert config_path({"XDG_CONFIG_HOME": "/cfg", "TRAINPROBE_CONFIG": "/etc/tp.toml"}) == Path(
        "/etc/tp.toml"
    )


def test_load_config_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "trainprobe").mkdir()
    (tmp_path / "trainprobe" / "targets.toml").write_text(
        '[targets]\nbox = "ssh=box//venv=/v"\n[groups]\npair = ["box", "ssh=other"]\n', encoding="utf-8"
    )
    monkeypatch.delenv("TRAINPROBE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    config = load_config()
    assert config.path == str(tmp_path / "trainprobe" / "targets.toml")
    assert expand_targets(["pair"], config) == ["ssh=box//venv=/v", "ssh=other"]


def test_missing_default_file_is_an_empty_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINPROBE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_config() == FleetConfig()


def test_missing_named_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPROBE_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(UsageError, match=r"nope\.toml does not exist"):
        load_config()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[targets\n", "not valid TOML"),
        ("[hosts]\na = 1\n", "unknown table 'hosts'"),
        ("[targets]\na = 1\n", "targets.a must be a target string"),
        ("[groups]\ng = [1, 2]\n", "groups.g must be a list"),
        ('[targets]\nx = "ssh=a"\n[groups]\nx = ["ssh=b"]\n', "'x' is both a target and a group"),
        ('[targets]\n"a b" = "ssh=a"\n', "'a b' is not a usable name"),
    ],
)
def test_bad_targets_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "targets.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_config(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)
