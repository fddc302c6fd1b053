"""Zip archives inside a mapped buffer: a file view for ``zipfile``, record locations and CRC32 verification.

torch writes zip archives uncompressed with a CRC32 per record but never checks them on load;
``verify_zip_crc`` does. It reads the mapped bytes in chunks, one record per thread, and uses zlib-ng's CRC32
when the optional ``zlib-ng`` package is installed (``pip install 'trainprobe[fast]'``): measured 18-23 GB/s
against 2.5-4 GB/s for the standard library's on the same machine, with identical results. Without it,
everything works the same with ``zlib.crc32`` (the far side of ``--on`` usually has only Python and numpy)."""

from __future__ import annotations

import io
import mmap
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: a safetensors scan never needs zipfile (measured: ~4 ms)
    import zipfile

from trainprobe.checkpoint.reading.mapping import page_releaser
from trainprobe.checkpoint.reading.zip_headers import header_problem
from trainprobe.checkpoint.reading.zipdir import ZIP_DEFLATED, ZIP_STORED, Entry

# CRC32 of a buffer continuing from a running value, as zlib.crc32(data, value).
Crc32 = Callable[[Any, int], int]

# Per call to the CRC function: large enough that the call's overhead vanishes, small enough that the pages
# already checked can be dropped from the resident set as the pass goes (as scan does).
_CHUNK = 8 << 20
_PAGE = mmap.PAGESIZE
# Below this many bytes in all, threads cost more than they save.
_PARALLEL_MIN_BYTES = 32 << 20
_WORKERS = min(4, os.cpu_count() or 1)


def _fastest_crc32() -> tuple[str, Crc32]:
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return "zlib", zlib.crc32
    return "zlib-ng", zlib_ng.crc32


# Which CRC32 implementation ``verify_zip_crc`` and the fingerprints use: "zlib-ng" or "zlib" (the
# fallback; the values are the same). Both release the GIL on large buffers, so records are checked in
# parallel either way.
CRC32_BACKEND, default_crc32 = _fastest_crc32()


class BufferWindow(io.RawIOBase):
    """A read-only, seekable file over ``buffer[base:base+length]`` without copying it (zipfile reads
    through it)."""

    def __init__(self, buffer: Any, base: int = 0, length: int | None = None) -> None:
        super().__init__()
        self._view = memoryview(buffer)
        self._base = base
        self._length = len(self._view) - base if length is None else length
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        else:
            self._pos = self._length + offset
        if self._pos < 0:
            raise OSError("seek before start of window")
        return self._pos

    def readinto(self, b: Any) -> int:
        start = min(self._pos, self._length)
        n: int = min(len(b), self._length - start)
        b[:n] = self._view[self._base + start : self._base + start + n]
        self._pos = start + n
        return n

    def close(self) -> None:
        self._view.release()
        super().close()


def record_data_offset(buffer: Any, base: int, info: Entry) -> int:
    """The offset (relative to ``base``) where a stored record's bytes start: after its local header."""
    header = bytes(memoryview(buffer)[base + info.header_offset : base + info.header_offset + 30])
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise ValueError(f"record {info.filename} has no local header at offset {info.header_offset}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return int(info.header_offset) + 30 + int(name_len) + int(extra_len)


#: The most bytes a compressed record may inflate to (torch never compresses; a deflate bomb of 3 MB would
#: inflate to gigabytes).
MAX_INFLATED = 32 << 20
_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"


class RecordError(ValueError):
    """A zip record that cannot be read as torch reads it (encrypted, an unknown compression, inflating past
    :data:`MAX_INFLATED`); ``limit`` says whether a limit of trainprobe's refused it (rather than damage)."""

    def __init__(self, message: str, *, limit: bool = False) -> None:
        super().__init__(message)
        self.limit = limit


def read_record(buffer: Any, base: int, info: Entry, total: int) -> bytes:
    """The bytes of one record of the zip archive at ``buffer[base:base+total]``, read as torch's reader
    reads them: without checking the CRC32 (``verify`` does that), stored or deflated, encrypted ones
    refused; deflated ones inflated to at most :data:`MAX_INFLATED` bytes."""
    if info.flag_bits & 0x1:
        raise RecordError(f"record {info.filename} is encrypted, which torch cannot read")
    start = record_data_offset(buffer, base, info)
    end = start + info.compress_size
    if end > total:
        raise RecordError(f"record {info.filename} is truncated at byte {total:,} of at least {end:,}")
    raw = memoryview(buffer)[base + start : base + end]
    try:
        if info.compress_type == ZIP_STORED:
            return bytes(raw)
        if info.compress_type != ZIP_DEFLATED:
            raise RecordError(
                f"record {info.filename} uses compression method {info.compress_type}: torch cannot read it"
            )
        # Measured first in small pieces that are not kept: a bomb is refused without its megabytes ever
        # being held (memory stays the program's own plus what it keeps).
        if _inflated_size(raw, info.filename) > MAX_INFLATED:
            raise RecordError(
                f"record {info.filename} inflates to more than {MAX_INFLATED >> 20} MB "
                f"({info.compress_size:,} bytes compressed; torch never compresses it)",
                limit=True,
            )
        return zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, MAX_INFLATED + 1)
    finally:
        raw.release()


def _inflated_size(raw: memoryview, name: str) -> int:
    """How many bytes a raw deflate stream inflates to, counted in 1 MiB pieces that are not kept, stopping
    past :data:`MAX_INFLATED`; RecordError when it does not inflate."""
    piece = 1 << 20
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    size, offset, pending = 0, 0, b""
    try:
        while size <= MAX_INFLATED and not inflater.eof:
            if not pending and offset < len(raw):
                pending = bytes(raw[offset : offset + piece])
                offset += len(pending)
            out = inflater.decompress(pending, piece)
            size += len(out)
            pending = inflater.unconsumed_tail
            if not out and not pending and offset >= len(raw):
                break  # the input ended (a stream cut short inflates to what it holds, as torch reads it)
    except zlib.error as exc:
        raise RecordError(f"record {name} does not inflate ({exc})") from None
    return size


def entry_count(buffer: Any, base: int, total: int) -> int | None:
    """How many records the archive's end-of-central-directory record declares (zip64 too), read before
    ``zipfile`` builds an object per record; None when it cannot be found (zipfile then says why)."""
    tail_start = max(0, total - (22 + 0xFFFF))
    with memoryview(buffer)[base + tail_start : base + total] as view:
        tail = bytes(view)
    at = tail.rfind(_EOCD)
    if at < 0 or at + 22 > len(tail):
        return None
    (count,) = struct.unpack("<H", tail[at + 10 : at + 12])
    locator = at - 20
    if count == 0xFFFF and locator >= 0 and tail[locator : locator + 4] == _ZIP64_LOCATOR:
        (offset,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
        record = (
            bytes(memoryview(buffer)[base + offset : base + offset + 56]) if offset + 56 <= total else b""
        )
        if record[:4] == b"PK\x06\x06":
            (count,) = struct.unpack("<Q", record[32:40])
    return int(count)


@dataclass(frozen=True)
class RecordProblem:
    """One integrity problem of a zip archive: the record it concerns ("" for the whole archive) and what."""

    record: str
    message: str


def verify_zip_crc(
    buffer: Any,
    base: int = 0,
    length: int | None = None,
    *,
    crc32: Crc32 | None = None,
    workers: int | None = None,
) -> list[str]:
    """CRC32 and size of every record of the zip archive in ``buffer[base:base+length]``; one line per
    problem, in the archive's record order.

    ``crc32`` replaces the CRC function (default: zlib-ng's when installed, else ``zlib.crc32``); ``workers``
    bounds the threads that check records in parallel (default: up to 4)."""
    return [p.message for p in record_problems(buffer, base, length, crc32=crc32, workers=workers)]


def record_problems(
    buffer: Any,
    base: int = 0,
    length: int | None = None,
    *,
    crc32: Crc32 | None = None,
    workers: int | None = None,
) -> list[RecordProblem]:
    """:func:`verify_zip_crc` with each problem's record name, so a reader can name the tensor it holds; also
    the bytes around each record (:func:`~.zip_headers.header_problem`: its local header, torch's padding, its
    data descriptor), which a CRC32 of the data does not cover."""
    import zipfile

    crc32 = crc32 or default_crc32
    length = len(buffer) - base if length is None else length
    try:
        with zipfile.ZipFile(BufferWindow(buffer, base, length)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return [RecordProblem("", f"not a readable zip archive: {exc}")]
    # Per record, in archive order: a problem found from the headers alone, or a range whose CRC to compute.
    found: list[RecordProblem | tuple[zipfile.ZipInfo, int, int]] = []
    for info in infos:
        altered = header_problem(buffer, base, length, info)
        if altered is not None:  # the bytes around the record were changed: its data may still be right
            found.append(RecordProblem(info.orig_filename, altered))
        if info.compress_type != zipfile.ZIP_STORED:
            continue  # torch never compresses; zipfile itself checks compressed records when they are read
        try:
            start = record_data_offset(buffer, base, info)
        except ValueError as exc:
            found.append(RecordProblem(info.orig_filename, str(exc)))
            continue
        end = start + info.file_size
        if end > length:
            found.append(
                RecordProblem(
                    info.orig_filename,
                    f"record {info.filename} is truncated at byte {length:,} of at least {end:,}",
                )
            )
            continue
        found.append((info, base + start, base + end))
    ranges = [item for item in found if not isinstance(item, RecordProblem)]
    release = page_releaser(buffer)
    with memoryview(buffer) as view:

        def check(item: tuple[zipfile.ZipInfo, int, int]) -> RecordProblem | None:
            info, start, end = item
            crc = _record_crc32(view, start, end, crc32, release)
            if crc == info.CRC:
                return None
            return RecordProblem(
                info.orig_filename,
                f"record {info.filename} fails its CRC32 check (stored {info.CRC:08x}, computed {crc:08x})",
            )

        workers = min(workers or _WORKERS, len(ranges))
        if workers > 1 and sum(end - start for _i, start, end in ranges) >= _PARALLEL_MIN_BYTES:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainprobe-crc") as pool:
                outcomes = iter(list(pool.map(check, ranges)))
        else:
            outcomes = iter([check(item) for item in ranges])
    problems: list[RecordProblem] = []
    for item in found:
        problem = item if isinstance(item, RecordProblem) else next(outcomes)
        if problem is not None:
            problems.append(problem)
    return problems


def _record_crc32(
    view: memoryview, start: int, end: int, crc32: Crc32, release: Callable[[int, int], None]
) -> int:
    """CRC32 of ``view[start:end]``, chunk by chunk, dropping the pages already read from the resident set."""
    crc = 0
    released = start  # everything before this is dropped already, or belongs to the record before
    for pos in range(start, end, _CHUNK):
        stop = min(end, pos + _CHUNK)
        crc = crc32(view[pos:stop], crc)
        release(released, stop)
        released = max(released, stop // _PAGE * _PAGE)
    return crc
