"""A NaN tensor whose safetensors name holds a lone surrogate (``"w\\udcff"`` in the header's JSON): the
fingerprint hashes names as bytes (surrogatepass), so every command says non-finite, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, safetensors

CASE = Case(scan=1, check=1, triage=1, says="NON-FINITE", seconds=10.0)
HEADER = b'{"w\\udcff": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "model.safetensors", HEADER, f32(float("nan"), 1.0))
