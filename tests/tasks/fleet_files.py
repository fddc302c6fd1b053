"""Small files for fleet tests, written byte by byte (no torch needed)."""

from __future__ import annotations

from pathlib import Path


def nan_safetensors(path: Path) -> Path:
    """A safetensors file with one float32 tensor ``w`` = [1.0, NaN]."""
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00\x00\x80\x3f\x00\x00\xc0\x7f")
    return path
