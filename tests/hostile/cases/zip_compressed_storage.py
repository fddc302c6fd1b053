"""A storage record deflated (torch never compresses one): the tensor is reported missing, corrupt."""

from __future__ import annotations

import zipfile
from pathlib import Path

from hostile.craft import Case, f32, named, pickle_of, tensor, write_zip

CASE = Case(scan=1, check=1, triage=1, says="is compressed, which torch never writes")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(w=tensor("0", (2,))))
    path = write_zip(folder / "deflated.pt", [("archive/data.pkl", data)])
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(zipfile.ZipInfo("archive/data/0"), f32(1.0, 2.0), compress_type=zipfile.ZIP_DEFLATED)
    return path
