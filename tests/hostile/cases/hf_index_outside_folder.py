"""A sharded index whose weight_map points at a file outside its folder (a path, or a device): refused
without opening it."""

from __future__ import annotations

import json
from pathlib import Path

from hostile.craft import Case

CASE = Case(scan=1, check=1, triage=1, says="names a shard outside its folder")


def build(folder: Path, sentinel: Path) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": {}, "weight_map": {"w": "/dev/zero", "v": "../../etc/passwd"}}))
    return path
