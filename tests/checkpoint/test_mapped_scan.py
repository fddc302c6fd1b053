"""Large tensors read from the map itself under a read lease (no pread copy): the same report as the pread
path, whatever the workers; a writer that breaks the lease waits a block, not the scan, and the rest is read
with pread (the same report when nothing was cut, "changed while read" when the file was); and every lease
is let go when the scan is done."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainprobe.checkpoint import numerics, scan
from trainprobe.checkpoint.reading.formats import open_file
from trainprobe.checkpoint.reading.lease import leases_usable, take_lease
from trainprobe.checkpoint.safe_io import CHANGED_WHILE_READ
from trainprobe.checkpoint.scanning import mapped
from trainprobe.checkpoint.scanning import run as scan_run

needs_leases = pytest.mark.skipif(not leases_usable(), reason="this system grants no read leases")


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A safetensors file (fingerprinted in the pass): a 24 MB float32 tensor with NaN, +Inf and −Inf in
    different pieces, a bfloat16 one with a late NaN, an int64 one and a small float32 one."""
    rng = np.random.default_rng(1)
    f32 = rng.standard_normal(6_000_001).astype(np.float32).reshape(-1, 1)
    f32[4_500_001, 0], f32[5_000_000, 0], f32[5_999_999, 0], f32[4_200_000, 0] = (
        np.inf,
        np.nan,
        -np.inf,
        np.nan,
    )
    bf16 = (rng.standard_normal(3_000_000).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bf16[2_900_000] = 0x7FC0
    tensors = {
        "w": (f32, "F32"),
        "b": (bf16.reshape(1000, 3000), "BF16"),
        "i": (np.arange(400_000, dtype=np.int64), "I64"),
        "s": (np.ones(1000, dtype=np.float32), "F32"),
    }
    header: dict[str, Any] = {}
    offset = 0
    for name, (arr, dtype) in tensors.items():
        span = [offset, offset + arr.nbytes]
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": span}
        offset += arr.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path = tmp_path_factory.mktemp("mapped") / "big.safetensors"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text)
        for arr, _dtype in tensors.values():
            fh.write(arr.tobytes())
    return path


def _json(path: Path, workers: int, **options: bool) -> Any:
    return _timeless(scan([str(path)], workers=workers, **options).to_json())


@needs_leases
def test_large_tensors_are_read_from_the_map_under_a_lease(big: Path) -> None:
    ckpt = open_file(str(big))
    try:
        lease = take_lease(ckpt.records[0].storage.buffer)
        assert lease is not None
        try:
            kinds = {
                r.name: {getattr(j, "func", None) for j in mapped.plan_mapped(r, lease, threaded=True).jobs}
                for r in ckpt.records
            }
        finally:
            lease.let_go()
    finally:
        ckpt.close()
    assert kinds["w"] == kinds["b"] == kinds["i"] == {mapped._mapped_piece}
    assert mapped._mapped_piece not in kinds["s"]  # a small tensor: plan_nonfinite's own


def test_the_map_read_reports_what_the_pread_copy_does_whatever_the_workers(
    big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapped_one = _json(big, 1, stats=True)
    assert _json(big, 4, stats=True) == mapped_one
    with monkeypatch.context() as m:  # pieces of 4 kB: every tensor crosses threads
        m.setattr(numerics, "PIECE_BYTES", 4096)
        assert _json(big, 4, stats=True) == mapped_one
    with monkeypatch.context() as m:  # no lease: every block copied with pread, as before
        m.setattr(scan_run, "take_lease", lambda _buffer: None)
        assert _json(big, 1, stats=True) == mapped_one
        assert _json(big, 4, stats=True) == mapped_one
    (file,) = scan([str(big)], workers=2).files
    found = {t.name: (t.nan, t.posinf, t.neginf, t.first_bad_index) for t in file.tensors}
    assert found == {
        "w": (2, 1, 1, [4_200_000, 0]),
        "b": (1, 0, 0, [966, 2000]),
        "i": (0, 0, 0, None),
        "s": (0, 0, 0, None),
    }
    fingerprints = {t.name: t.fingerprint for t in file.tensors}
    crc = zlib.crc32(np.arange(400_000, dtype=np.int64).tobytes())
    assert fingerprints["i"] == f"crc32:{crc:08x}:3200000"


class _BrokenLease:
    """A lease a writer has broken: no block may be read."""

    size = 1 << 62
    broken = True

    def enter(self) -> bool:
        return False

    def leave(self) -> None:  # pragma: no cover - never entered
        raise AssertionError

    def let_go(self) -> None:
        pass


def test_a_broken_lease_reads_on_with_pread_to_the_same_report(
    big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer that only opened the file (its lease broken, nothing cut) changes nothing the report says.
    whole = _json(big, 2)
    monkeypatch.setattr(scan_run, "take_lease", lambda _buffer: _BrokenLease())
    assert _json(big, 2) == whole
    assert _json(big, 1) == whole


def test_a_file_cut_after_its_lease_broke_is_changed_while_read_never_a_clean_tensor(
    big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "cut.safetensors"
    copy.write_bytes(big.read_bytes())

    def broken_then_cut(_buffer: Any) -> _BrokenLease:
        with open(copy, "r+b") as fh:  # what the writer does once the lease is let go
            fh.truncate(1000)
        return _BrokenLease()

    monkeypatch.setattr(scan_run, "take_lease", broken_then_cut)
    report = scan([str(copy)], workers=2)
    (file,) = report.files
    errors = {t.name: t.error for t in file.tensors}
    assert all(e and e.startswith(CHANGED_WHILE_READ) for e in errors.values()), errors
    assert report.exit_code == 2


_WRITER = """
import sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "r+b"):
    pass
print(time.perf_counter() - t0)
"""


@needs_leases
def test_a_writer_breaks_the_lease_and_waits_only_until_it_is_seen(big: Path) -> None:
    ckpt = open_file(str(big))
    try:
        lease = take_lease(ckpt.records[0].storage.buffer)
        assert lease is not None
        assert lease.enter()
        lease.leave()
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(big)], stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 10
        while lease.enter():  # the break shows within the writer's wait; no block is read after it
            lease.leave()
            assert time.monotonic() < deadline, "the writer's open never broke the lease"
            time.sleep(0.01)
        out, _ = writer.communicate(timeout=10)  # let go when seen (no block was being read)
        assert float(out) < 5
        assert lease.broken
        assert not lease.enter()
    finally:
        ckpt.close()


@needs_leases
def test_every_lease_is_let_go_when_the_scan_is_done(big: Path) -> None:
    scan([str(big)], workers=2)
    scan([str(big)], workers=1)
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(big)], capture_output=True, text=True, timeout=30, check=True
    )
    assert float(done.stdout) < 2, "a lease outlived its scan: the writer waited for its break time"


@needs_leases
def test_a_process_that_handles_sigurg_takes_no_lease(big: Path) -> None:
    # The break is told by SIGURG: where the program handles it, its handler would be called for our leases.
    ckpt = open_file(str(big))
    before = signal.signal(signal.SIGURG, lambda _signum, _frame: None)
    try:
        assert take_lease(ckpt.records[0].storage.buffer) is None
    finally:
        signal.signal(signal.SIGURG, before)
        ckpt.close()
    assert _json(big, 2) == _json(big, 1)  # read with pread instead: the same report


def test_pages_are_dropped_behind_the_pieces_read_in_batches_whatever_their_order() -> None:
    # Pieces finish out of order on several threads; the elements dropped are always ones read, every
    # element is dropped by the end, and a drop waits for a batch (each is a TLB flush on every core).
    dropped: list[tuple[int, int]] = []
    releaser = mapped.PrefixReleaser(lambda start, count: dropped.append((start, count)), 100, 30)
    for start in (10, 20, 0):  # [0, 30) done only once the first piece is
        releaser.done(start, 10)
        assert dropped == ([] if start else [(0, 30)])
    releaser.done(40, 10)
    releaser.done(30, 10)  # [30, 50): under a batch
    assert dropped == [(0, 30)]
    for start in (90, 70, 80, 60):
        releaser.done(start, 10)
    assert dropped == [(0, 30)]  # waiting for [50, 60)
    releaser.done(50, 10)
    assert dropped == [(0, 30), (30, 70)]  # the last piece done: the rest released at once
