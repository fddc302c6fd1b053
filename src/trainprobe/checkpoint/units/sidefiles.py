"""The small JSON files a save writes beside a unit's weights: the ones that record its step (HF Trainer's
``trainer_state.json`` and the fields of :data:`SIDE_STEP_FIELDS`), and whether each JSON file of a unit is
still a JSON document (:func:`side_file_evidence`). Read capped (:func:`.safe_io.read_side`), never
executed. Stdlib only."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.safe_io import read_side

#: The JSON files a save writes beside its weights that record its step, and the keys they record it under
#: (each one of :data:`.facts.STEP_KEYS`): diffusers' ``EMAModel.save_pretrained`` writes its
#: ``optimization_step`` into the model's config.json. (trainer_state.json is a source of its own.)
SIDE_STEP_FIELDS: dict[str, tuple[str, ...]] = {"config.json": ("optimization_step",)}


def _side_json(unit_path: str, name: str) -> Any:
    folder = unit_path if os.path.isdir(unit_path) else os.path.dirname(unit_path)
    try:
        return json.loads(read_side(os.path.join(folder, name)))
    except (OSError, ValueError, RecursionError):
        return None


def trainer_state_step(unit_path: str) -> int | None:
    """``global_step`` of the ``trainer_state.json`` beside a unit's files (HF Trainer), or None."""
    data = _side_json(unit_path, "trainer_state.json")
    value = data.get("global_step") if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def side_step_fields(unit_path: str) -> list[tuple[str, str, int]]:
    """The step fields of the JSON files beside a unit's files (:data:`SIDE_STEP_FIELDS`): (file, key,
    value)."""
    out = []
    for name, keys in SIDE_STEP_FIELDS.items():
        data = _side_json(unit_path, name)
        if not isinstance(data, dict):
            continue
        for key in keys:
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63:
                out.append((name, key, value))
    return out


def side_file_evidence(unit_path: str, listed: Sequence[str]) -> list[Evidence]:
    """One failed check per JSON file of a unit (``listed``: its files that are not checkpoint data) that no
    longer parses: a config, a trainer state or an index a save wrote is a JSON document, and one that is not
    (bytes overwritten, cut short) is damage to the unit — its loader refuses it — even where every tensor
    reads. A file that cannot be opened or is over the side-file cap is not judged here."""
    out = []
    for path in listed:
        if not path.endswith(".json"):
            continue
        try:
            json.loads(read_side(path))
        except OSError:
            continue
        except (ValueError, RecursionError) as exc:
            name = os.path.relpath(path, unit_path) if path != unit_path else os.path.basename(path)
            why = "it is nested too deeply" if isinstance(exc, RecursionError) else _brief(exc)
            out.append(
                Evidence(
                    "side-files", "fail", f"{name} is not a JSON document ({why}): the file was damaged",
                    indicates=V.CORRUPT, file=name,
                )
            )  # fmt: skip
    return out


def _brief(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"bytes that are not UTF-8 at byte {exc.start}"
    text = str(exc)
    return text if len(text) <= 80 else text[:79] + "…"
