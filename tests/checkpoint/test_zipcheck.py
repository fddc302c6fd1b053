"""Zip CRC32 verification on real torch-written files: the same verdicts with zlib-ng and with the standard
library's zlib (the fallback on machines without the ``fast`` extra), records split into several chunks, the
parallel path, and pages released as the pass goes."""

from __future__ import annotations

import json
import mmap
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainprobe.checkpoint.reading import zipcheck
from trainprobe.checkpoint.reading.zipcheck import verify_zip_crc

torch = pytest.importorskip("torch")
zlib_ng = pytest.importorskip("zlib_ng.zlib_ng")  # in the test extra

BACKENDS = {"zlib-ng": zlib_ng.crc32, "zlib": zlib.crc32}
CHUNK = zipcheck._CHUNK


def _data_range(path: Path, record_suffix: str) -> tuple[str, int, int]:
    """(record name, first byte, size) of a stored record, read from its local header."""
    with zipfile.ZipFile(path) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith(record_suffix))
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        header = fh.read(30)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.filename, info.header_offset + 30 + name_len + extra_len, info.file_size


def _flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ 0x01]))


@pytest.fixture
def mapped() -> Iterator[list[mmap.mmap]]:
    maps: list[mmap.mmap] = []
    yield maps
    for m in maps:
        m.close()


def _verify(path: Path, maps: list[mmap.mmap], **kwargs: object) -> list[str]:
    with open(path, "rb") as fh:
        m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    maps.append(m)
    return verify_zip_crc(m, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def big(tmp_path: Path) -> Path:
    """A checkpoint whose largest record spans three CRC chunks (2.5 chunks of float32), beside small ones."""
    torch.manual_seed(0)
    path = tmp_path / "big.pt"
    big_numel = CHUNK * 5 // 2 // 4
    torch.save({"big": torch.randn(big_numel), "small": torch.randn(7), "step": torch.tensor(3)}, path)
    return path


def _bad_records_by_zipfile(path: Path) -> set[str]:
    """The independent oracle: the records Python's zipfile refuses to read for a CRC mismatch."""
    bad = set()
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            try:
                zf.read(info)
            except zipfile.BadZipFile as exc:
                if "CRC" not in str(exc):
                    raise
                bad.add(info.filename)
    return bad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 4])
def test_clean_multichunk_checkpoint_passes(
    big: Path, mapped: list[mmap.mmap], backend: str, workers: int
) -> None:
    # A CRC not carried from chunk to chunk would fail here: the big record has three chunks.
    assert _verify(big, mapped, crc32=BACKENDS[backend], workers=workers) == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", [0, CHUNK - 1, CHUNK, 2 * CHUNK + 5, -1])
def test_flipped_byte_is_caught_in_every_chunk(
    big: Path, mapped: list[mmap.mmap], backend: str, where: int
) -> None:
    name, start, size = _data_range(big, "data/0")
    assert size > 2 * CHUNK
    offset = start + (where % size)
    with open(big, "rb") as fh:
        fh.seek(start)
        data = bytearray(fh.read(size))
    data[where % size] ^= 0x01
    _flip(big, offset)
    problems = _verify(big, mapped, crc32=BACKENDS[backend])
    with zipfile.ZipFile(big) as zf:
        stored = zf.getinfo(name).CRC
    assert problems == [
        f"record {name} fails its CRC32 check (stored {stored:08x}, computed {zlib.crc32(bytes(data)):08x})"
    ]
    assert _bad_records_by_zipfile(big) == {name}


def test_backends_and_worker_counts_agree_on_many_bad_records(
    tmp_path: Path, mapped: list[mmap.mmap]
) -> None:
    # 12 records of 4 MiB (over the parallel threshold), every third one damaged.
    path = tmp_path / "many.pt"
    torch.manual_seed(1)
    torch.save({f"t{i}": torch.randn(1 << 20) for i in range(12)}, path)
    for key in range(0, 12, 3):
        _name, start, size = _data_range(path, f"data/{key}")
        _flip(path, start + size // 2)
    results = {
        (backend, workers): _verify(path, mapped, crc32=fn, workers=workers)
        for backend, fn in BACKENDS.items()
        for workers in (1, 2, 4)
    }
    first = next(iter(results.values()))
    assert all(r == first for r in results.values())
    assert [p.split()[1] for p in first] == [f"many/data/{k}" for k in range(0, 12, 3)]
    assert {p.split()[1] for p in first} == _bad_records_by_zipfile(path)


def test_default_backend_is_zlib_ng_when_installed() -> None:
    assert zipcheck.CRC32_BACKEND == "zlib-ng"


def _cli(args: list[str], *, without_zlib_ng: bool) -> tuple[int, dict[str, object]]:
    """The trainprobe CLI in a fresh interpreter; ``without_zlib_ng`` makes ``import zlib_ng`` fail there, as
    on a machine without the ``fast`` extra."""
    block = "sys.modules['zlib_ng'] = None; " if without_zlib_ng else ""
    code = (
        f"import sys; {block}sys.argv[0] = 'trainprobe'; from trainprobe.checkpoint.reading import zipcheck; "
        "sys.stderr.write('crc32 backend: ' + zipcheck.CRC32_BACKEND + '\\n'); "
        "from trainprobe.cli import main; sys.exit(main())"
    )
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    assert f"crc32 backend: {'zlib' if without_zlib_ng else 'zlib-ng'}\n" in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("without_zlib_ng", [False, True])
def test_scan_verify_and_check_without_zlib_ng_give_the_same_verdicts(
    big: Path, without_zlib_ng: bool
) -> None:
    clean = big.with_name("clean.pt")
    clean.write_bytes(big.read_bytes())
    name, start, _size = _data_range(big, "data/0")
    _flip(big, start + CHUNK + 1)

    code, report = _cli(["scan", "--verify", "--json", str(clean), str(big)], without_zlib_ng=without_zlib_ng)
    files = {Path(str(f["path"])).name: f for f in report["files"]}  # type: ignore[attr-defined]
    assert code == 1  # a CRC mismatch is a finding
    assert files["clean.pt"]["verdict"] == "clean"
    assert files["big.pt"]["verdict"] == "corrupt"
    (problem,) = files["big.pt"]["problems"]
    assert problem.startswith(f"record {name} fails its CRC32 check")

    code, report = _cli(["check", "--json", str(clean), str(big)], without_zlib_ng=without_zlib_ng)
    results = {Path(str(r["path"])).name: r for r in report["units"]}  # type: ignore[attr-defined]
    assert code == 1
    assert {k: r["verdict"] for k, r in results.items()} == {"clean.pt": "unknown", "big.pt": "corrupt"}
    assert f"record {name} fails its CRC32 check" in results["big.pt"]["reason"]


@pytest.mark.skipif(not hasattr(mmap.mmap, "madvise"), reason="needs madvise (Linux)")
def test_pages_are_released_as_the_pass_goes(tmp_path: Path, mapped: list[mmap.mmap]) -> None:
    # The CRC pass reads the whole file; without releasing pages the process's file-backed resident set
    # would grow by the file's size (64 MiB here).
    path = tmp_path / "wide.pt"
    torch.save({"w": torch.zeros(16 << 20)}, path)
    with open(path, "rb") as fh:
        m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.append(m)

    def rss_file_kib() -> int:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("RssFile:"))

    before = rss_file_kib()
    assert verify_zip_crc(m, workers=1) == []
    grown_mib = (rss_file_kib() - before) / 1024
    assert grown_mib < 8, f"resident set grew by {grown_mib:.0f} MiB while checking a 64 MiB record"
