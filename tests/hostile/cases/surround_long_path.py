"""A NaN checkpoint at a 4,500-character path (over PATH_MAX): the walk cannot open the folders past the
limit and says so ("not read", exit 2), never "clean"."""

from __future__ import annotations

import os
from pathlib import Path

from hostile.craft import Case, f32, safetensors

CASE = Case(scan=2, check=2, triage=2, says="not read", seconds=10.0)
HEADER = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'


def build(folder: Path, sentinel: Path) -> Path:
    top = folder / "long"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(45):  # 45 * 100 characters: past PATH_MAX (4096) from the top
            name = "n" * 99
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.chdir(fd)
        try:
            safetensors(Path("model.safetensors"), HEADER, f32(float("nan"), 1.0))
        finally:
            os.chdir(folder)
    finally:
        os.close(fd)
    return top
