"""A safetensors header naming a million empty tensors: refused by the per-file tensor limit before it is
parsed (unreadable, one line), not checked for minutes."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=2, check=2, triage=2, says="names 1,000,000 tensors, more than the 100,000")


def build(folder: Path, sentinel: Path) -> Path:
    entry = b'"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    return safetensors(
        folder / "million.safetensors", b"{" + b",".join(entry % i for i in range(10**6)) + b"}"
    )
