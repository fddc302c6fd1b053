"""TensorBoard event files: CRC32C against published vectors, record bytes built by hand from the spec, our
writer and reader agreeing on both value encodings, and damaged files."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from trainprobe.errors import LogError
from trainprobe.metrics import analyze
from trainprobe.metrics.readers import protobuf as pb
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.crc32c import crc32c, crc32c_bytes, crc32c_many
from trainprobe.metrics.readers.tensorboard import TensorBoardReader, encode_scalar_event, write_event_file
from trainprobe.metrics.readers.tfrecord import frame_record, mask_crc, read_records


def test_crc32c_matches_published_check_values() -> None:
    # The CRC catalogue check value and the iSCSI vectors of RFC 3720, appendix B.4.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    buf = np.frombuffer(b"123456789" + bytes(range(9)), dtype=np.uint8)
    got = crc32c_many(buf, np.array([0, 9]), np.array([9, 9]))
    assert [int(c) for c in got] == [0xE3069283, crc32c(bytes(range(9)))]


def test_crc32c_of_many_lengths_matches_the_byte_loop() -> None:
    """Records of every length from 0 to 300 and two long ones (one over many lanes and levels), in one
    call: the lane-and-fold computation agrees with the plain byte-by-byte definition."""
    rng = np.random.default_rng(0)
    lengths = np.array([*range(301), 70_000, 4_096 * 64 + 3])
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) + 3
    buf = rng.integers(0, 256, int(lengths.sum()) + 10, dtype=np.uint8)
    got = crc32c_many(buf, starts, lengths)
    want = [crc32c_bytes(buf[s : s + n].tobytes()) for s, n in zip(starts, lengths, strict=True)]
    assert got.tolist() == want
    assert crc32c(bytes(buf[:300_000])) == crc32c_bytes(bytes(buf[:300_000]))


def test_records_of_many_distinct_lengths_read_fast(tmp_path: Path) -> None:
    """3,000 records of 3,000 different lengths: the CRC once took a numpy step per byte position of every
    distinct length (4.5 M steps here, minutes); now a few hundred steps in all."""
    path = tmp_path / "events.out.tfevents.1"
    with open(path, "wb") as fh:
        for i in range(3_000):
            # an unknown field (number 15) of i bytes: readers skip it, and every record has its own length
            padding = b"\x7a" + pb.varint(i) + bytes(i)
            fh.write(frame_record(encode_scalar_event(i, float(i), {"loss": 1.0}) + padding))
    (run,) = TensorBoardReader().read(path, ReadOptions())
    assert len(run) == 3_000
    assert run.columns["loss"].tolist() == [1.0] * 3_000


def test_event_bytes_follow_the_protobuf_spec() -> None:
    # Event{wall_time: 1.5, step: 3, summary{value{tag: "loss", simple_value: 0.5}}}, field by field.
    value = b"\x0a\x04loss" + b"\x15" + struct.pack("<f", 0.5)
    summary = b"\x0a" + bytes([len(value)]) + value
    event = b"\x09" + struct.pack("<d", 1.5) + b"\x10\x03" + b"\x2a" + bytes([len(summary)]) + summary
    assert encode_scalar_event(3, 1.5, {"loss": 0.5}) == event
    record = frame_record(event)
    assert record[:8] == struct.pack("<Q", 26)
    assert record[8:12] == struct.pack("<I", mask_crc(crc32c(record[:8])))
    assert record[12:38] == event
    assert record[38:] == struct.pack("<I", mask_crc(crc32c(event)))


@pytest.mark.parametrize("as_tensor", [False, True], ids=["simple_value", "tensor"])
def test_reader_reads_what_the_writer_wrote(tmp_path: Path, as_tensor: bool) -> None:
    path = tmp_path / "events.out.tfevents.1700000000.host"
    rows = [
        (s, 1_700_000_000.0 + s, {"train/loss": 1.0 + (9.0 if s == 70 else 0.0), "lr": 1e-3})
        for s in range(100)
    ]
    write_event_file(path, rows, as_tensor=as_tensor)
    report = analyze(tmp_path)
    (run,) = report.runs
    assert run.format == "tensorboard"
    assert run.steps[-1] == 99
    assert run.columns["train/loss"][70] == pytest.approx(10.0)
    assert run.wall is not None
    assert run.wall[1] - run.wall[0] == pytest.approx(1.0)
    assert [(f.kind, f.metric, f.step) for f in report.findings] == [("spike", "train/loss", 70)]


def test_corrupt_record_is_a_log_error(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1"
    write_event_file(path, [(s, float(s), {"loss": 1.0}) for s in range(20)])
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(LogError, match="CRC mismatch"):
        TensorBoardReader().read(path, ReadOptions())


def test_torn_last_record_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.2"
    write_event_file(path, [(s, float(s), {"loss": 1.0}) for s in range(20)])
    path.write_bytes(path.read_bytes()[:-7])  # a writer mid-record
    (run,) = TensorBoardReader().read(path, ReadOptions())
    assert len(run) == 19


def _peak_reading(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    seen = sum(1 for _ in read_records(path))
    _now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seen, peak


def test_records_are_read_in_chunks_not_the_whole_file(tmp_path: Path) -> None:
    """The memory reading takes does not grow with the file (8 MB and 40 MB of records: the same chunk and
    CRC batch; read whole, the 32 MB more came on top twice: the file and the records); a record longer than
    a chunk comes whole; a CRC mismatch far into the file names its record and byte."""
    record = frame_record(bytes(range(256)) * 4)
    small, big, long = tmp_path / "small.tfevents", tmp_path / "big.tfevents", tmp_path / "long.tfevents"
    small.write_bytes(record * 8_000)
    big.write_bytes(record * 40_000)
    long.write_bytes(record + frame_record(b"x" * (5 << 20)) + record)
    seen_small, peak_small = _peak_reading(small)
    seen_big, peak_big = _peak_reading(big)
    assert (seen_small, seen_big) == (8_000, 40_000)
    assert peak_big - peak_small < 8 << 20 < big.stat().st_size - small.stat().st_size, peak_big - peak_small
    assert [len(r) for r in read_records(long)] == [1024, 5 << 20, 1024]
    data = bytearray(big.read_bytes())
    data[30_000 * len(record) + 20] ^= 0xFF  # a data byte of record 30,000, in the eighth chunk
    big.write_bytes(bytes(data))
    with pytest.raises(LogError, match=f"record 30000 at byte {30_000 * len(record)}: data CRC mismatch"):
        list(read_records(big))
