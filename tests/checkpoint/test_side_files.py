"""A JSON file of a checkpoint directory that no longer parses (bytes overwritten, cut short) is damage to
the unit, in ``check`` and ``scan`` alike, named with the file — even where every tensor reads; the same
directory with its JSON intact is healthy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths

torch = pytest.importorskip("torch")


@pytest.fixture
def unit(tmp_path: Path) -> Path:
    """An HF-style checkpoint folder: weights, optimizer, trainer_state.json and config.json."""
    folder = tmp_path / "checkpoint-4"
    folder.mkdir()
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(4):
        model(torch.ones(1, 4)).sum().backward()
        opt.step()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": []}))
    (folder / "config.json").write_text(json.dumps({"model_type": "linear", "hidden_size": 4}))
    return folder


def _answers(folder: Path) -> tuple[str, str, str]:
    checked = check_paths([str(folder)]).to_json()["units"][0]
    failed = " | ".join(e["message"] for e in checked["evidence"] if e["outcome"] == "fail")
    return checked["verdict"], scan([str(folder)]).to_json()["units"][0]["verdict"], failed


def test_intact_json_is_healthy(unit: Path) -> None:
    assert _answers(unit)[:2] == ("consistent", "clean")


@pytest.mark.parametrize("name", ["config.json", "trainer_state.json"])
def test_overwritten_json_is_corrupt_in_check_and_scan(unit: Path, name: str) -> None:
    raw = bytearray((unit / name).read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 8] = b"\xff" * 8
    (unit / name).write_bytes(bytes(raw))
    checked, scanned, why = _answers(unit)
    assert (checked, scanned) == ("corrupt", "corrupt")
    assert f"{name} is not a JSON document" in why


def test_json_cut_short_is_corrupt(unit: Path) -> None:
    text = (unit / "config.json").read_text()
    (unit / "config.json").write_text(text[: len(text) // 2])
    assert _answers(unit)[0] == "corrupt"
