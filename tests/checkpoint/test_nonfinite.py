"""Exact NaN/+Inf/−Inf counts for every floating dtype torch writes, read back from real torch.save files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainprobe.checkpoint import compute_stats, count_nonfinite, open_checkpoint

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
# Ten values: 3 NaN, 2 +Inf, 1 −Inf among finite ones.
VALUES = [1.0, NAN, INF, -2.0, NAN, -INF, 0.0, INF, NAN, 3.0]

# dtype -> (nan, +inf, −inf) torch stores for VALUES. Formats without Inf store it as NaN.
CASES: dict[str, tuple[int, int, int]] = {
    "float64": (3, 2, 1),
    "float32": (3, 2, 1),
    "float16": (3, 2, 1),
    "bfloat16": (3, 2, 1),
    "float8_e5m2": (3, 2, 1),
    "float8_e4m3fn": (3, 0, 0),  # torch saturates ±Inf to ±448 in e4m3fn
    "float8_e4m3fnuz": (6, 0, 0),
    "float8_e5m2fnuz": (6, 0, 0),
}


def _save_and_open(tmp_path: Path, tensors: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "t.pt"
    torch.save(tensors, path)
    ckpt = open_checkpoint(str(path))
    return {r.name: r for r in ckpt.records}


@pytest.mark.parametrize(("dtype", "expected"), CASES.items())
def test_counts_per_dtype(tmp_path: Path, dtype: str, expected: tuple[int, int, int]) -> None:
    t = torch.tensor(VALUES).to(getattr(torch, dtype))
    rec = _save_and_open(tmp_path, {"t": t})["t"]
    found = count_nonfinite(rec)
    assert (found.nan, found.posinf, found.neginf) == expected
    assert found.first_bad_index == (1,)
    # torch agrees after upcasting.
    up = t.float()
    assert found.nan == int(torch.isnan(up).sum())
    assert found.posinf == int(torch.isposinf(up).sum())


@pytest.mark.parametrize(
    "dtype",
    ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"],
)
def test_every_bit_pattern_classified_as_torch_does(tmp_path: Path, dtype: str) -> None:
    width = torch.int16 if dtype == "bfloat16" else torch.uint8
    codes = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(width) if dtype == "bfloat16" else None
    if codes is None:
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    t = codes.view(getattr(torch, dtype))
    rec = _save_and_open(tmp_path, {"t": t})["t"]
    found = count_nonfinite(rec)
    up = t.float()
    assert found.nan == int(torch.isnan(up).sum())
    assert found.posinf == int(torch.isposinf(up).sum())
    assert found.neginf == int(torch.isneginf(up).sum())


def test_e8m0_only_0xff_is_nan(tmp_path: Path) -> None:
    t = torch.tensor([1.0, 2.0, 0.5, NAN]).to(torch.float8_e8m0fnu)
    rec = _save_and_open(tmp_path, {"t": t})["t"]
    assert count_nonfinite(rec).nan == int(torch.isnan(t.float()).sum()) == 1


def test_complex_counts_an_element_once_by_its_worst_part(tmp_path: Path) -> None:
    t = torch.complex(
        torch.tensor([1.0, NAN, INF, 1.0, -INF, NAN]), torch.tensor([0.0, INF, 0.0, -INF, 2.0, NAN])
    )
    for dtype in (torch.complex64, torch.complex128):
        rec = _save_and_open(tmp_path, {"c": t.to(dtype)})["c"]
        found = count_nonfinite(rec)
        # NaN if either part is NaN (elements 1, 5); else +Inf if either part is +Inf (2); else −Inf (3, 4).
        assert (found.nan, found.posinf, found.neginf) == (2, 1, 2)
        assert found.first_bad_index == (1,)


def test_integer_and_bool_tensors_are_listed_not_flagged(tmp_path: Path) -> None:
    recs = _save_and_open(tmp_path, {"i": torch.tensor([-1, 2**62]), "b": torch.tensor([True])})
    assert count_nonfinite(recs["i"]).total == 0
    assert count_nonfinite(recs["b"]).total == 0


def test_views_count_only_their_own_elements(tmp_path: Path) -> None:
    base = torch.zeros(6, 8)
    base[0, 0] = NAN  # outside the view
    base[3, 5] = INF  # inside both views below
    base[5, 1] = -INF  # inside the strided view only
    view = base[1::2, 1::2]  # rows 1,3,5 cols 1,3,5,7
    recs = _save_and_open(tmp_path, {"view": view, "t": base[2:].t()})
    found = count_nonfinite(recs["view"])
    assert (found.nan, found.posinf, found.neginf) == (0, 1, 1)
    assert found.first_bad_index == (1, 2)  # base[3, 5]
    t = count_nonfinite(recs["t"])
    assert (t.nan, t.posinf, t.neginf) == (0, 1, 1)
    assert t.first_bad_index == (1, 3)  # base[5, 1] comes first in the transposed order


def test_small_chunks_give_the_same_answer(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(3)
    t = torch.randn(7, 9, 11, generator=g)
    flat = t.view(-1)
    idx = torch.randperm(flat.numel(), generator=g)[:40]
    flat[idx[:20]] = NAN
    flat[idx[20:30]] = INF
    flat[idx[30:]] = -INF
    rec = _save_and_open(tmp_path, {"t": t[:, 2:, ::2]})["t"]
    whole = count_nonfinite(rec)
    assert count_nonfinite(rec, chunk_bytes=12) == whole  # forces splitting inside rows
    view = t[:, 2:, ::2]
    assert whole.nan == int(torch.isnan(view).sum())
    assert whole.posinf == int(torch.isposinf(view).sum())
    first = int(torch.nonzero(~torch.isfinite(view).reshape(-1))[0])
    assert whole.first_bad_index == tuple(int(i) for i in np.unravel_index(first, tuple(view.shape)))


# Bit patterns of one bad value each: quiet and signalling NaNs of both signs and odd payloads, and ±Inf.
_BAD_BITS = {
    "float32": [
        0x7FC00000,
        0xFFC00000,
        0x7F800001,
        0xFF800001,
        0x7FFFFFFF,
        0xFFFFFFFF,
        0x7F800000,
        0xFF800000,
    ],
    "float64": [
        0x7FF8000000000000,
        0xFFF8000000000000,
        0x7FF0000000000001,
        0xFFFFFFFFFFFFFFFF,
        0x7FF0000000000000,
        0xFFF0000000000000,
    ],
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_bad_value_anywhere_in_a_large_tensor_is_found(tmp_path: Path, dtype: str) -> None:
    # Large float32/float64 tensors are judged by their extremes per block first (bits.all_finite): every
    # NaN payload and either infinity, alone among the largest finite values, at the edges of those blocks
    # and of a vector loop, is still counted, and nothing is where there is none.
    n = (1 << 20) + 37  # past the blocks of 2**18 elements and the pieces threads take
    positions = [0, 1, 15, 16, 17, (1 << 18) - 1, 1 << 18, (1 << 18) + 1, n // 2, n - 2, n - 1]
    bits_dtype = np.uint32 if dtype == "float32" else np.uint64
    patterns = _BAD_BITS[dtype]
    tensors: dict[str, Any] = {}
    for i, pos in enumerate(positions):
        pattern = patterns[i % len(patterns)]
        values = np.full(n, np.finfo(dtype).max, dtype=dtype)
        values[::2] = -np.finfo(dtype).max
        values.view(bits_dtype)[pos] = pattern
        tensors[f"t{i}"] = torch.from_numpy(values)
    tensors["clean"] = torch.from_numpy(np.full(n, np.finfo(dtype).max, dtype=dtype))
    recs = _save_and_open(tmp_path, tensors)
    for i, pos in enumerate(positions):
        got = count_nonfinite(recs[f"t{i}"])
        assert got.total == 1, (i, pos, got)
        assert got.first_bad_index == (pos,), (i, pos, got)
    assert count_nonfinite(recs["clean"]).total == 0


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
)
def test_stats_match_torch_over_finite_values(tmp_path: Path, dtype: str) -> None:
    t = torch.tensor([0.5, -1.5, 0.0, 2.0, NAN, 4.0, 0.0, -0.25]).to(getattr(torch, dtype))
    rec = _save_and_open(tmp_path, {"t": t})["t"]
    stats = compute_stats(rec)
    assert stats is not None
    finite = t.double()[torch.isfinite(t.double())]
    assert stats.min == pytest.approx(float(finite.min()))
    assert stats.max == pytest.approx(float(finite.max()))
    assert stats.mean == pytest.approx(float(finite.mean()))
    assert stats.std == pytest.approx(float(finite.std(unbiased=False)))
    assert stats.absmax == pytest.approx(float(finite.abs().max()))
    assert stats.l2 == pytest.approx(math.sqrt(float((finite**2).sum())))
    assert stats.zero_fraction == pytest.approx(float((finite == 0).double().mean()))
