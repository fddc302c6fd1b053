"""Bytes changed around a record of a real torch-written file — its local header, torch's alignment padding,
the data descriptor after its data — leave every tensor readable and every CRC32 right: ``check`` still says
the file is corrupt and names the record, as ``scan --verify`` does; an archive torch wrote as it is, and one
Python's zipfile wrote (no padding, no descriptors), has no such problem."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths
from trainprobe.checkpoint.reading.zipcheck import verify_zip_crc

torch = pytest.importorskip("torch")


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(64), "step": 3}, path)
    return path


def _record(path: Path, suffix: str) -> tuple[zipfile.ZipInfo, int, int, int]:
    """(entry, local header offset, name length, extra length) of the record whose name ends in ``suffix``."""
    with zipfile.ZipFile(path) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith(suffix))
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        header = fh.read(30)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info, info.header_offset, name_len, extra_len


def _overwrite(path: Path, at: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[at : at + len(data)] = data
    path.write_bytes(bytes(raw))


def _check(path: Path) -> tuple[str, str]:
    unit = check_paths([str(path)]).to_json()["units"][0]
    failed = [e["message"] for e in unit["evidence"] if e["outcome"] == "fail"]
    return unit["verdict"], " | ".join(failed)


def test_a_file_as_torch_wrote_it_has_no_header_problem(saved: Path) -> None:
    assert verify_zip_crc(saved.read_bytes()) == []
    assert _check(saved) == ("unknown", "")  # healthy; no optimizer to show a tear


def test_bytes_over_torchs_padding_are_corrupt(saved: Path) -> None:
    _info, start, name_len, extra_len = _record(saved, "data/0")
    assert extra_len > 4  # torch pads this record's data to 64 bytes
    _overwrite(saved, start + 30 + name_len + 4, b"\xff" * 8)
    assert torch.load(saved, weights_only=True)["w"].sum() == 64  # torch still loads it, every value right
    verdict, why = _check(saved)
    assert verdict == "corrupt"
    assert "data/0's local header" in why
    assert "padding" in why
    assert any("padding" in p for p in verify_zip_crc(saved.read_bytes()))


def test_a_local_name_that_differs_from_the_directory_is_corrupt(saved: Path) -> None:
    info, start, _name_len, _extra_len = _record(saved, "byteorder")
    _overwrite(saved, start + 30, b"\xff\xff")
    verdict, why = _check(saved)
    assert verdict == "corrupt"
    assert f"the directory {info.orig_filename!r}" in why


def test_a_data_descriptor_that_disagrees_is_corrupt(saved: Path) -> None:
    info, start, name_len, extra_len = _record(saved, "data/0")
    descriptor = start + 30 + name_len + extra_len + info.compress_size
    assert saved.read_bytes()[descriptor : descriptor + 4] == b"PK\x07\x08"
    _overwrite(saved, descriptor + 4, b"\xff\xff\xff\xff")  # the CRC32 it records
    verdict, why = _check(saved)
    assert verdict == "corrupt"
    assert "data descriptor" in why


def test_scan_verify_names_the_tensor_of_an_altered_record(saved: Path) -> None:
    _info, start, name_len, _extra_len = _record(saved, "data/0")
    _overwrite(saved, start + 30 + name_len + 4, b"\xff" * 8)
    report = scan([str(saved)], verify=True).to_json()
    assert report["units"][0]["verdict"] == "corrupt"


def test_an_archive_zipfile_wrote_has_no_header_problem(tmp_path: Path) -> None:
    path = tmp_path / "plain.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        zf.writestr("archive/version", b"3\n")
    assert verify_zip_crc(path.read_bytes()) == []
