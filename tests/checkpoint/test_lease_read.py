"""The scan reads a large tensor straight from the map only under a read lease on its file
(:mod:`trainprobe.checkpoint.stable_read`): a truncation waits for the lease, the reader sees the break at
its next block, lets the lease go and reads on with ``preadv`` ("changed while read", never SIGBUS); a file
someone holds open for writing is read with ``preadv`` from the start; either way the counts and the
fingerprint are those of one pass over the bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from trainprobe.checkpoint import numerics, stable_read
from trainprobe.checkpoint.reading.formats import open_file

pytestmark = pytest.mark.skipif(not hasattr(os, "preadv"), reason="needs Linux")


def _safetensors(path: Path, values: np.ndarray) -> None:
    n = values.size
    header = f'{{"w": {{"dtype": "F32", "shape": [{n}], "data_offsets": [0, {4 * n}]}}}}'.encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as fh:
        fh.write(len(header).to_bytes(8, "little") + header)
        fh.write(values.astype("<f4").tobytes())


def _leases_here(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        if not stable_read.take_lease(fd):
            return False
        stable_read.let_go(fd)
        return True
    finally:
        os.close(fd)


def _values() -> np.ndarray:
    values = np.linspace(-1.0, 1.0, 10 << 20, dtype=np.float32)  # 40 MiB: three pieces of 16 MiB
    values[[7, 5 << 20, (10 << 20) - 1]] = [np.nan, np.inf, -np.inf]
    return values


def _one_pass(values: np.ndarray) -> tuple[int, int, int]:
    return int(np.isnan(values).sum()), int(np.isposinf(values).sum()), int(np.isneginf(values).sum())


def test_map_blocks_are_views_under_a_lease_and_count_as_preadv_does(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    values = _values()
    _safetensors(path, values)
    if not _leases_here(path):
        pytest.skip("no read leases on this filesystem or for this user")
    ckpt = open_file(str(path))
    try:
        (record,) = ckpt.records
        arr = record.array().reshape(-1)
        blocks = stable_read.read_blocks(record, arr, 1 << 30, numerics.blocks)
        _start, block = next(blocks)
        assert np.shares_memory(block, arr), "a block under a lease is a view of the map, not a copy"
        blocks.close()
        leased = numerics.count_nonfinite(record, fingerprint=True, workers=1)
        old = stable_read._LEASES[:]
        stable_read._LEASES[:] = [False]
        try:
            copied = numerics.count_nonfinite(record, fingerprint=True, workers=1)
        finally:
            stable_read._LEASES[:] = old
    finally:
        ckpt.close()
    assert leased == copied
    assert (leased.nan, leased.posinf, leased.neginf) == _one_pass(values)
    assert leased.first_bad_index == (7,)


def test_a_file_open_for_writing_is_read_with_preadv(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    values = _values()
    _safetensors(path, values)
    ckpt = open_file(str(path))
    writer = os.open(path, os.O_WRONLY)  # a save in progress: no lease can be had
    try:
        (record,) = ckpt.records
        arr = record.array().reshape(-1)
        seen = [
            not np.shares_memory(block, arr)
            for _s, block in stable_read.read_blocks(
                record, arr, 1 << 30, numerics.blocks, pread_block=4 << 20
            )
        ]
        assert seen
        assert all(seen), "every block copied by preadv"
        found = numerics.count_nonfinite(record, workers=1)
    finally:
        os.close(writer)
        ckpt.close()
    assert (found.nan, found.posinf, found.neginf) == _one_pass(values)


# In a child: a SIGBUS kills it (a clear failure here) instead of the test run.
_CUT_WHILE_LEASED = textwrap.dedent(
    """
    import json, os, sys, threading, time
    import numpy as np
    from trainprobe.checkpoint import numerics, stable_read
    from trainprobe.checkpoint.reading.formats import open_file
    from trainprobe.errors import CheckpointError

    path = sys.argv[1]
    ckpt = open_file(path)
    (record,) = ckpt.records
    arr = record.array().reshape(-1)
    blocks = stable_read.read_blocks(record, arr, 1 << 30, numerics.blocks)
    _start, block = next(blocks)
    viewed = bool(np.shares_memory(block, arr))
    cut = threading.Event()

    def truncate():
        os.truncate(path, 4096)  # waits in the kernel while the lease is held
        cut.set()

    threading.Thread(target=truncate, daemon=True).start()
    waited = not cut.wait(0.3)  # the lease holds it back; nothing here needs the wait to be long
    error = None
    try:
        for i, (_start, block) in enumerate(blocks):
            block.sum()  # every page of every block handed out is touched
            if i == 0:  # the lease was let go for this block: the cut lands before the next one is read
                cut.wait(30)
    except CheckpointError as exc:
        error = exc.reason
    print(json.dumps({"viewed": viewed, "waited": waited, "cut": cut.wait(30), "error": error}))
    """
)


def test_a_truncation_waits_for_the_lease_and_the_rest_is_changed_while_read(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    _safetensors(path, _values())
    if not _leases_here(path):
        pytest.skip("no read leases on this filesystem or for this user")
    done = subprocess.run(
        [sys.executable, "-c", _CUT_WHILE_LEASED, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"the reader died ({done.returncode}): {done.stderr}"
    out = json.loads(done.stdout)
    assert out["viewed"], out
    assert out["waited"], "the truncation went ahead while the lease was held"
    assert out["cut"], "the truncation still waits: the lease was never let go"
    assert out["error"], out
    assert out["error"].startswith("changed while read"), out
