"""The small JSON files a save writes beside a unit's weights that record its step: HF Trainer's
``trainer_state.json`` and the fields of :data:`SIDE_STEP_FIELDS`. Read capped (:func:`.safe_io.read_side`),
never executed. Stdlib only."""

from __future__ import annotations

import json
import os
from typing import Any

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
