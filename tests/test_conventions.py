"""The rules about run files' names (trainprobe.conventions): one answer for every command."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trainprobe.conventions as conventions
from trainprobe.conventions import (
    is_log_name,
    is_sidecar,
    is_sure_log_name,
    step_in_name,
    step_in_path,
    step_json,
    step_text,
)
from trainprobe.remote.shipping import modules_named


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("checkpoint-2000", (2000, "-")),
        ("global_step1500", (1500, "")),
        ("epoch=3-step=2000.ckpt", (2000, "=")),
        ("iter_0002000", (2000, "_")),
        ("step-00000100.pt", (100, "-")),
        ("out/1200/", (1200, "")),
        ("500.pt", (500, "")),
        ("resnet50.pt", None),
        ("epoch=3.ckpt", None),
        ("model.safetensors", None),
    ],
)
def test_step_in_name(name: str, expected: tuple[int, str] | None) -> None:
    assert step_in_name(name) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("runs/global_step1500/mp_rank_00_model_states.pt", 1500),
        ("ckpt/step-00000040.pt", 40),
        ("lightning/epoch=3-step=2000.ckpt", 2000),
        ("out/checkpoint-500/model.safetensors", 500),
        ("runs/1200/model.pt", 1200),
        ("checkpoint-7/500.pt", 7),  # a named step beats a bare number
        ("resnet50.pt", None),
        ("models/resnet50.pt", None),
    ],
)
def test_step_in_path(path: str, expected: int | None) -> None:
    assert step_in_path(path) == expected


@pytest.mark.parametrize(
    ("name", "sidecar"),
    [
        ("step-00000100.pt.manifest.json", True),
        ("latest", True),
        (".step-00000100.pt.tmp-4242", True),
        ("d/.latest.tmp-17", True),
        ("step-00000100.pt", False),
        ("latest.pt", False),
        ("resnet50.pt", False),
    ],
)
def test_is_sidecar(name: str, sidecar: bool) -> None:
    assert is_sidecar(name) is sidecar


@pytest.mark.parametrize(
    ("name", "log", "sure"),
    [
        ("train.log", True, True),
        ("run/TRAIN.LOG", True, True),
        ("events.out.tfevents.1700000000.host", True, True),
        ("metrics.jsonl", True, True),
        ("trainer_state.json", True, True),
        ("notes.txt", True, False),
        ("chronicles.md", True, False),
        ("run-abc.wandb", True, False),
        ("results.json", True, False),
        ("config.json", False, False),
        ("model.safetensors.index.json", False, False),
        ("step-00000100.pt.manifest.json", False, False),
        ("wandb-metadata.json", False, False),
        (".hidden.log", False, False),
        ("model.pt", False, False),
    ],
)
def test_log_names(name: str, log: bool, sure: bool) -> None:
    assert is_log_name(name) is log
    assert is_sure_log_name(name) is sure


def test_suffix_lists_do_not_overlap() -> None:
    assert not set(conventions.CHECKPOINT_SUFFIXES) & set(conventions.NOT_CHECKPOINT_SUFFIXES)
    assert set(conventions.SURE_LOG_SUFFIXES) <= set(conventions.LOG_SUFFIXES)


@pytest.mark.parametrize(
    ("x", "text", "json"),
    [
        (100.0, "100", 100),
        (2.5, "2.5", 2.5),
        (float("nan"), "nan", "nan"),
        (float("inf"), "inf", "inf"),
        (float("-inf"), "-inf", "-inf"),
        (2.0**60, "1152921504606846976", 2.0**60),
    ],
)
def test_step_formats(x: float, text: str, json: int | float | str) -> None:
    assert step_text(x) == text
    got = step_json(x)
    assert got == json
    assert type(got) is type(json)


def test_no_step_is_a_question_mark() -> None:
    assert step_text(None) == "?"
    assert step_json(3) == 3


def test_stdlib_only_and_shipped_with_errors() -> None:
    source = Path(conventions.__file__)
    tree = ast.parse(source.read_bytes())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "math", "os", "re"}
    for name in ("trainprobe.metrics", "trainprobe.checkpoint", "trainprobe.errors"):
        shipped = {m.name for m in modules_named([name])}
        assert "trainprobe.conventions" in shipped
