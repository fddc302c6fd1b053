"""``check`` reads each Adam pair once and streams: exact NaN/Inf counts from the fused pass, small memory."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint import scan  # noqa: E402
from trainprobe.checkpoint.check import check_path  # noqa: E402


def _adam_checkpoint(path: Path, m: Any, v: Any, weight: Any, **extra: Any) -> None:
    """One parameter's AdamW state, written by torch as ``optimizer.state_dict()`` writes it."""
    state = {0: {"step": torch.tensor(3.0), "exp_avg": m, "exp_avg_sq": v}}
    groups = [{"params": [0], "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}]
    torch.save(
        {"step": 3, "model": {"w": weight}, "optimizer": {"state": state, "param_groups": groups}, **extra},
        path,
    )


def _scan_counts(path: Path) -> dict[str, dict[str, Any]]:
    (report,) = scan([str(path)]).files
    return {
        t.name: {"nan": t.nan, "posinf": t.posinf, "neginf": t.neginf, "first_bad_index": t.first_bad_index}
        for t in report.tensors
        if t.nan + t.posinf + t.neginf
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_nan_and_inf_in_adam_state_are_counted_exactly(tmp_path: Path, dtype: Any) -> None:
    # 3 x 250,000 elements: the Adam pass takes 2^18-element chunks, so bad values sit in several chunks and
    # on both sides of a chunk boundary.
    torch.manual_seed(0)
    shape = (3, 250_000)
    v = torch.rand(shape) * 1e-4
    m = ((torch.rand(shape) - 0.5) * v.sqrt()).to(dtype)  # consistent: |m| <= sqrt(v)/2
    v = v.to(dtype)
    m[0, 7] = float("nan")
    m[1, 12_143] = float("inf")  # flat index 262,143: last element of the first chunk
    m[1, 12_144] = float("-inf")
    m[2, 249_999] = float("nan")
    v[1, 5] = float("inf")  # v = +Inf with a finite m: within the bound, still a non-finite value
    v[2, 100] = float("nan")
    v[2, 101] = float("-inf")
    path = tmp_path / "bad.pt"
    _adam_checkpoint(path, m, v, torch.zeros(shape, dtype=dtype))

    result = check_path(str(path))
    found = {
        n["name"]: {k: n[k] for k in ("nan", "posinf", "neginf", "first_bad_index")} for n in result.nonfinite
    }
    assert found == {
        "optimizer.state.0.exp_avg": {"nan": 2, "posinf": 1, "neginf": 1, "first_bad_index": [0, 7]},
        "optimizer.state.0.exp_avg_sq": {"nan": 1, "posinf": 1, "neginf": 1, "first_bad_index": [1, 5]},
    }
    assert found == _scan_counts(path)  # the same counts scan's own NaN pass finds
    neg = next(e for e in result.evidence if e.check == "exp-avg-sq-nonnegative")
    assert neg.outcome == "fail"  # the -Inf in exp_avg_sq is also a negative second moment
    assert result.verdict == "nonfinite"  # the worst evidence heads the unit
    assert "2 tensor(s) hold NaN/Inf, e.g. optimizer.state.0.exp_avg (2 NaN, 1 +Inf, 1 -Inf)" in [
        e.message for e in result.evidence if e.check == "non-finite"
    ]


def test_finite_adam_state_over_many_chunks_reports_no_nonfinite(tmp_path: Path) -> None:
    torch.manual_seed(0)
    n = 700_001
    v = torch.rand(n) * 1e-4
    m = (torch.rand(n) - 0.5) * 2 * v.sqrt()  # |m| <= sqrt(v): well inside the 7.27 bound
    v[1000] = -0.0  # not negative, not non-finite
    m[1000] = 0.0
    path = tmp_path / "ok.pt"
    _adam_checkpoint(path, m, v, torch.zeros(n))
    result = check_path(str(path))
    assert result.nonfinite == []
    assert result.verdict == "consistent", result.reason
    bound = next(e for e in result.evidence if e.check == "adam-bound")
    assert bound.message.startswith("optimizer: 1 Adam state pairs, 700,001 elements: |exp_avg| <= 7.27")
    assert 0.1 < bound.values["worst_ratio_to_bound"] < 1 / 7.27 + 1e-3


# Runs the CLI and prints its own peak resident set (VmHWM, which a fork from this big pytest process does not
# inflate the way wait4's ru_maxrss does).
_MEASURED = """
import runpy, sys
sys.argv = ["trainprobe", *sys.argv[1:]]
try:
    runpy.run_module("trainprobe", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as fh:
        print("VmHWM", next(line.split()[1] for line in fh if line.startswith("VmHWM:")), file=sys.stderr)
"""


def _peak_rss_mib(*args: str) -> float:
    """Peak resident set of one ``trainprobe`` process, in MiB."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return int(proc.stderr.split()[-1]) / 1024


@pytest.mark.skipif(
    not hasattr(mmap.mmap, "madvise") or not os.path.exists("/proc/self/status"), reason="needs Linux"
)
def test_check_streams_in_as_little_memory_as_scan(tmp_path: Path) -> None:
    # 112 MiB: 8 Mi-element fp32 master weights with their bf16 copy and AdamW's two moments. Without page
    # release the Adam pass and the master-weights pass leave all they read resident (~110 MiB more than
    # scan here).
    torch.manual_seed(0)
    n = 8 << 20
    master = torch.randn(n)
    v = torch.rand(n) * 1e-4
    m = (torch.rand(n) - 0.5) * v.sqrt()
    path = tmp_path / "big.pt"
    _adam_checkpoint(path, m, v, master.to(torch.bfloat16), master={"w": master})
    result = check_path(str(path))
    assert result.verdict == "consistent", result.reason
    assert {e.check for e in result.evidence if e.outcome == "pass"} >= {"adam-bound", "master-weights"}
    scan_mib = _peak_rss_mib("scan", str(path))
    check_mib = _peak_rss_mib("check", str(path))
    size_mib = path.stat().st_size / 2**20
    # scan reads large tensors with preadv into one small buffer (checkpoint.stable_read: nothing stays
    # resident); check's Adam and master-weights passes read from the map and release pages behind them, so
    # they keep a window of pages more than scan — tens of MiB, never the file
    said = f"check peaked at {check_mib:.0f} MiB, scan at {scan_mib:.0f} MiB on a {size_mib:.0f} MiB file"
    assert check_mib < scan_mib + 64, said
    assert check_mib < size_mib, said


def test_adam_counts_over_many_chunks_match_the_exact_formula(tmp_path: Path) -> None:
    # Violations scattered over a 1.1 Mi-element pair: most chunks take the fast path, a few the slow one.
    torch.manual_seed(0)
    n = 1_100_000
    v = torch.rand(n) * 1e-4
    m = (torch.rand(n) - 0.5) * v.sqrt()
    outside_at = torch.tensor([5, 262_144, 700_000, 1_099_999])
    m[outside_at] = 20.0 * v[outside_at].sqrt()  # 20/7.27 = 2.75x the bound
    v[[10, 900_000]] = 0.0  # a second moment of zero under a first moment that is not
    path = tmp_path / "mixed.pt"
    _adam_checkpoint(path, m, v, torch.zeros(n))

    bound = 7.2709  # adam_bound(0.9, 0.999)
    ratio = (m.abs() / v.sqrt()) / bound
    expected_outside = int((ratio[v > 0] > 1.0001).sum())
    expected_worst = float(ratio[v > 0].max())
    result = check_path(str(path))
    assert result.verdict == "torn"
    ev = {e.check: e for e in result.evidence}
    assert expected_outside == 4
    assert f"worst w: {expected_worst:.3g}× the bound, 4 element(s) outside" in ev["adam-bound"].message
    assert ev["adam-bound"].values["worst_ratio_to_bound"] == pytest.approx(expected_worst, rel=1e-4)
    assert ev["exp-avg-zero"].outcome == "fail"
    assert ev["exp-avg-sq-nonnegative"].outcome == "pass"
