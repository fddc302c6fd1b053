"""The central directory read without ``zipfile`` (:mod:`trainprobe.checkpoint.reading.zipdir`): on every
zip archive the tests have (torch-written files, the real frameworks' units, the hostile cases, and
archives made unusual on purpose) it either gives exactly what ``zipfile`` gives for every field the readers
use, or leaves the archive to ``zipfile`` (None); a plain torch file is scanned without importing it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest

from hostile.craft import build_cases
from trainprobe.checkpoint.reading.zipdir import central_directory

FIELDS = (
    "orig_filename",
    "filename",
    "header_offset",
    "compress_type",
    "compress_size",
    "file_size",
    "CRC",
    "flag_bits",
)


def _zipfile_view(data: bytes) -> list[tuple[Any, ...]] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return [tuple(getattr(i, f) for f in FIELDS) for i in zf.infolist()]
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
        return None


def _agrees(data: bytes) -> bool:
    """Whether the plain read agrees with zipfile; True also when it leaves the archive to zipfile."""
    ours = central_directory(data, 0, len(data))
    if ours is None:
        return True
    return [tuple(getattr(r, f) for f in FIELDS) for r in ours] == _zipfile_view(data)


def _zips(paths: list[Path]) -> list[Path]:
    candidates = [p for p in paths if p.is_file()]
    for path in paths:
        for folder, _dirs, names in os.walk(path):  # errors (a path too long on purpose) skipped
            candidates.extend(Path(folder) / n for n in sorted(names))
    found = []
    for p in candidates:
        try:
            if p.is_file() and p.stat().st_size < (256 << 20) and p.read_bytes()[:4] == b"PK\x03\x04":
                found.append(p)
        except OSError:
            continue
    return found


def test_torch_written_and_framework_archives_read_as_zipfile_reads_them(
    written: dict[str, Any], framework_units: Any
) -> None:
    zips = _zips([w.path for w in written.values()] + [Path(framework_units.root)])
    assert zips, "no zip archives among the fixtures"
    for path in zips:
        data = path.read_bytes()
        assert _agrees(data), path
        # A .distcp file is torch.save blobs one after the other, each read with its own base and length;
        # the damaged units are damaged on purpose.
        if path.suffix != ".distcp" and "damaged" not in path.parts:
            assert central_directory(data, 0, len(data)) is not None, f"torch wrote it plain: {path}"


def test_hostile_archives_read_as_zipfile_reads_them_or_are_left_to_it(tmp_path: Path) -> None:
    built = build_cases(tmp_path)
    zips = _zips(built)
    assert zips, "no zip archives among the hostile cases"
    for path in zips:
        assert _agrees(path.read_bytes()), path


def _archive(**options: Any) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", **options) as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        zf.writestr("archive/data/0", b"\x00" * 64)
        zf.writestr("archive/caf\u00e9", b"x")  # a UTF-8 name
        zf.writestr("archive/nul_trick", b"y")  # its _ becomes a NUL below
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate it is asked to write
            zf.writestr("archive/data/0", b"\x01" * 8)
    return out.getvalue().replace(b"nul_trick", b"nul\x00trick")


@pytest.mark.parametrize(
    "change",
    ["none", "comment", "prefix", "zip64", "deflated", "cut", "bad-directory", "bad-extra"],
)
def test_unusual_archives_are_read_as_zipfile_reads_them_or_left_to_it(change: str) -> None:
    data = _archive(compression=zipfile.ZIP_DEFLATED) if change == "deflated" else _archive()
    if change == "comment":
        buf = io.BytesIO(data)
        with zipfile.ZipFile(buf, "a") as zf:
            zf.comment = b"a comment"
        data = buf.getvalue()
    elif change == "prefix":
        data = b"#!/bin/sh\nexit 0\n" + data  # zipfile shifts every offset by what comes first
    elif change == "zip64":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as zf, zf.open("archive/data.pkl", "w", force_zip64=True) as fh:
            fh.write(b"\x80\x02}q\x00.")
        data = out.getvalue()
    elif change == "cut":
        data = data[:-7]
    elif change == "bad-directory":
        at = data.rfind(b"PK\x01\x02")
        data = data[:at] + b"PK\x01\x09" + data[at + 4 :]
    elif change == "bad-extra":
        at = data.rfind(b"PK\x01\x02")
        # an extra field length that runs past the entry (zipfile: "Corrupt extra field")
        data = data[: at + 30] + (60000).to_bytes(2, "little") + data[at + 32 :]
    assert _agrees(data)
    ours = central_directory(data, 0, len(data))
    if change in ("none", "deflated"):
        assert ours is not None
        assert [(r.orig_filename, r.filename) for r in ours][2:4] == [
            ("archive/caf\u00e9", "archive/caf\u00e9"),
            ("archive/nul\x00trick", "archive/nul"),
        ]
    elif change != "zip64":  # zip64 end records and local headers: read here, as zipfile reads them
        assert ours is None, "left to zipfile"


def test_a_torch_file_is_scanned_without_importing_zipfile(written: dict[str, Any]) -> None:
    code = (
        "import sys; from trainprobe.checkpoint import scan; "
        f"r = scan([{str(written['plain'].path)!r}], workers=1); "
        "assert r.to_json()['units'], r.to_json(); print('zipfile' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
