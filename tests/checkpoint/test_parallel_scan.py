"""Scan on every core, the same report: ``scan --json`` with one worker equals the one with four on every
checkpoint the tests have (the real frameworks' units, torch-written files, the hostile cases), with tensors
cut into pieces of a few kB too (every tensor then crosses threads); a large tensor read in pieces counts,
locates and fingerprints exactly as one pass over its bytes does."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hostile.craft import build_cases
from trainprobe.checkpoint import numerics, scan
from trainprobe.checkpoint.reading.formats import open_file
from trainprobe.checkpoint.threads import Pool, default_workers, in_order

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


def _timeless(value: Any) -> Any:
    """A report's JSON without its timings (the only thing that may differ between two scans)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _cli_json(paths: list[Path], *options: str) -> dict[str, Any]:
    done = subprocess.run(
        [TRAINPROBE, "scan", "--json", *options, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1, 2), done.stderr
    return dict(json.loads(done.stdout))


def _same_whatever_the_workers(paths: list[Path], monkeypatch: pytest.MonkeyPatch, **options: bool) -> None:
    one = _timeless(scan([str(p) for p in paths], workers=1, **options).to_json())
    assert _timeless(scan([str(p) for p in paths], workers=4, **options).to_json()) == one
    with monkeypatch.context() as m:  # every tensor of more than 4 kB in pieces, on four threads
        m.setattr(numerics, "PIECE_BYTES", 4096)
        assert _timeless(scan([str(p) for p in paths], workers=4, **options).to_json()) == one


def test_every_framework_unit_scans_the_same_on_one_worker_or_four(
    framework_units: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(framework_units.root)
    one = _cli_json([root], "--workers", "1")
    assert one["units"], "no units found"
    assert _timeless(_cli_json([root], "--workers", "4")) == _timeless(one)
    _same_whatever_the_workers([root], monkeypatch)
    _same_whatever_the_workers([root], monkeypatch, stats=True, verify=True)


def test_torch_written_files_scan_the_same_on_one_worker_or_four(
    written: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [w.path for w in written.values()]
    assert _timeless(_cli_json(paths, "--workers", "4")) == _timeless(_cli_json(paths, "--workers", "1"))
    _same_whatever_the_workers(paths, monkeypatch, stats=True, verify=True)


def test_hostile_files_scan_the_same_on_one_worker_or_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = build_cases(tmp_path)
    _same_whatever_the_workers(paths, monkeypatch, stats=True)


def _safetensors(path: Path, tensors: dict[str, np.ndarray[Any, Any]], dtypes: dict[str, str]) -> Path:
    header: dict[str, Any] = {}
    offset = 0
    for name, arr in tensors.items():
        header[name] = {
            "dtype": dtypes[name],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text)
        for arr in tensors.values():
            fh.write(arr.tobytes())
    return path


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray[Any, Any]]]:
    """One 40 MB float32 tensor (three pieces, the last short) with NaN, +Inf and −Inf in different pieces; a
    bfloat16 one with its bad bits late; an int64 one (fingerprinted only)."""
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal(10_000_003).astype(np.float32).reshape(-1, 1)
    f32[4_500_001, 0], f32[9_000_000, 0], f32[9_999_999, 0], f32[5_000_000, 0] = (
        np.nan,
        np.inf,
        -np.inf,
        np.nan,
    )
    bf16 = (rng.standard_normal(12_000_000).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bf16[11_000_000] = 0x7FC0  # NaN
    bf16[11_500_000] = 0xFF80  # −Inf
    i64 = np.arange(3_000_000, dtype=np.int64)
    tensors = {"w": f32, "b": bf16.reshape(3000, 4000), "i": i64}
    path = _safetensors(
        tmp_path_factory.mktemp("large") / "large.safetensors", tensors, {"w": "F32", "b": "BF16", "i": "I64"}
    )
    return path, tensors


def _truth(arr: np.ndarray[Any, Any], bf16: bool = False) -> dict[str, Any]:
    values = (arr.astype(np.uint32) << 16).view(np.float32) if bf16 else arr
    bad = ~np.isfinite(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
    first = np.flatnonzero(bad)
    return {
        "nan": int(np.isnan(values).sum()) if values.dtype.kind == "f" else 0,
        "posinf": int(np.isposinf(values).sum()) if values.dtype.kind == "f" else 0,
        "neginf": int(np.isneginf(values).sum()) if values.dtype.kind == "f" else 0,
        "first_bad_index": [int(i) for i in np.unravel_index(first[0], arr.shape)] if first.size else None,
        "fingerprint": f"crc32:{zlib.crc32(arr.tobytes()):08x}:{arr.nbytes}",
    }


def _tensors(report: Any) -> dict[str, dict[str, Any]]:
    (unit,) = report.units
    (file,) = unit.files
    keys = ("nan", "posinf", "neginf", "first_bad_index", "fingerprint", "stats")
    return {t.name: {k: getattr(t, k) for k in keys} for t in file.tensors}


def test_a_large_tensor_in_pieces_counts_as_one_pass_over_its_bytes(
    large: tuple[Path, dict[str, np.ndarray[Any, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, tensors = large
    ckpt = open_file(str(path))
    try:
        pieces = {r.name: len(numerics.plan_nonfinite(r, fingerprint=True).jobs) for r in ckpt.records}
    finally:
        ckpt.close()
    assert pieces == {"w": 3, "b": 2, "i": 2}  # 16 MiB pieces
    split = _tensors(scan([str(path)], stats=True, workers=4))
    with monkeypatch.context() as m:
        m.setattr(numerics, "PIECE_BYTES", 1 << 40)  # one piece each: the pass of one thread
        whole = _tensors(scan([str(path)], stats=True, workers=1))
    assert split == whole  # statistics too, bit for bit: blocks are summed in the same order
    for name, arr in tensors.items():
        truth = _truth(arr, bf16=name == "b")
        assert {k: v for k, v in split[name].items() if k != "stats"} == truth, name
    assert split["w"]["stats"]["max"] == pytest.approx(
        float(np.nanmax(np.where(np.isfinite(tensors["w"]), tensors["w"], np.nan)))
    )


def test_count_nonfinite_alone_reads_a_large_tensor_on_the_shared_threads(
    large: tuple[Path, dict[str, np.ndarray[Any, Any]]],
) -> None:
    """What check asks for each tensor: the same answer on the shared threads as in this one."""
    path, _tensors_written = large
    ckpt = open_file(str(path))
    try:
        for record in ckpt.records:
            parallel = numerics.count_nonfinite(record, fingerprint=True)
            alone = numerics.count_nonfinite(record, fingerprint=True, workers=1)
            assert parallel == alone, record.name
    finally:
        ckpt.close()


@pytest.mark.parametrize("kind", ["scan's pool", "concurrent.futures"])
def test_jobs_are_taken_only_as_fast_as_results_are_consumed(kind: str) -> None:
    """Memory stays bounded: at most the window of jobs is in flight, whatever the number of jobs."""
    from concurrent.futures import ThreadPoolExecutor

    taken = 0

    def jobs() -> Any:
        nonlocal taken
        for i in range(1000):
            taken += 1
            yield lambda i=i: i * i

    pool = Pool(4, "test") if kind == "scan's pool" else ThreadPoolExecutor(max_workers=4)
    try:
        results = in_order(jobs(), pool, 4, window=8)
        for i, value in enumerate(results):
            assert value == i * i
            assert taken <= i + 8
            if i == 100:
                break
        results.close()
    finally:
        pool.shutdown()
    assert taken <= 109


def test_the_pool_hands_back_what_a_job_raised_in_its_place_and_skips_what_was_cancelled() -> None:
    ran: list[int] = []

    def job(i: int) -> int:
        ran.append(i)
        if i == 3:
            raise ValueError("three")
        return i

    pool = Pool(2, "test")
    try:
        results = in_order([lambda i=i: job(i) for i in range(6)], pool, 2)
        assert [next(results) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(ValueError, match="three"):
            next(results)
        gate = threading.Event()
        blocked = [pool.submit(gate.wait) for _ in range(2)]  # both workers busy
        later = pool.submit(lambda: ran.append(99))
        later.cancel()
        gate.set()
        assert all(b.result() for b in blocked)
    finally:
        pool.shutdown()
    assert 99 not in ran, "a job cancelled before it started never runs"


def test_the_default_workers_follow_the_usable_cores() -> None:
    import os

    assert 1 <= default_workers() <= min(32, len(os.sched_getaffinity(0)))
