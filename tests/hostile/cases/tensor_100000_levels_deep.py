"""A NaN tensor under 100,000 nested lists: found without a RecursionError anywhere (the skeleton the
other commands read stops at 100 levels)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, tensor, torch_zip

CASE = Case(
    scan=1,
    check=1,
    triage=1,
    says="NaN 1",
    kept_mb=64.0,
    notes={
        "kept": "the walk keeps one frame per level of nesting while it descends: 100,000 frames, each with "
        "its path name (capped at 400 characters), about 120 MB at the deepest point, freed as it returns; "
        "names kept as links to the parent frame would make it a few MB (not done yet)"
    },
)


def build(folder: Path, sentinel: Path) -> Path:
    data = b"\x80\x02" + b"]" * 100_000 + tensor("0", (1,)) + b"a" * 100_000 + b"."
    return torch_zip(folder / "deeper.pt", data, {"0": f32(NAN)})
