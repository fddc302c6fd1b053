"""Each detector on small synthetic series, and the rolling median's fast paths against the plain
definition."""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.metrics import Options, analyze
from trainprobe.metrics.analyze import rows_to_run
from trainprobe.metrics.detectors import (
    detect_divergence,
    detect_spikes,
    detect_stalls,
    detect_throughput,
    metric_kind,
)
from trainprobe.metrics.rolling import trailing_median


def _rows(n: int, **series: np.ndarray) -> list[dict[str, float]]:
    return [{"step": float(i), **{k: float(v[i]) for k, v in series.items()}} for i in range(n)]


def _noise(n: int, level: float, seed: int = 0) -> np.ndarray:
    return level * (1 + np.random.default_rng(seed).normal(0, 0.01, n))


def test_rolling_median_exact_and_blocked_paths() -> None:
    x = np.random.default_rng(0).normal(size=3000)
    got = trailing_median(x, 50)
    want = np.array([np.median(x[i - 50 : i]) for i in range(50, 3000)])
    assert np.allclose(got[50:], want)
    big = np.random.default_rng(1).normal(size=200_000)
    approx = trailing_median(big, 64, exact_limit=1_000_000)  # over the limit: medians of block medians
    at = np.arange(1000, 200_000, 97)
    exact = np.array([np.median(big[i - 64 : i]) for i in at])
    # A median of block medians is a coarser estimate of the same level, not a different one.
    assert np.median(np.abs(approx[at] - exact)) < 0.2
    assert np.std(approx[at]) < 1.6 * np.std(exact)


def test_spike_threshold_and_relative_guard() -> None:
    loss = _noise(200, 1.0)
    loss[120] = 1.2  # 20 %: above the z threshold on this quiet series, under the 25 % relative guard
    loss[150] = 3.5
    run = rows_to_run(_rows(200, loss=loss))
    (spike,) = detect_spikes(run, "loss")
    assert (spike.kind, spike.step, spike.recovered_after, spike.severity) == ("spike", 150.0, 1.0, "error")
    assert spike.magnitude == pytest.approx(3.5, rel=0.05)
    assert detect_spikes(run, "loss", threshold=1e9) == []


def test_loss_dip_is_not_a_spike_but_accuracy_drop_is() -> None:
    x = _noise(200, 1.0)
    x[150] = 0.3
    assert detect_spikes(rows_to_run(_rows(200, loss=x)), "loss") == []
    (drop,) = detect_spikes(rows_to_run(_rows(200, accuracy=x)), "accuracy")
    assert drop.step == 150
    assert drop.kind == "spike"


def test_cliff_has_onset_and_new_level() -> None:
    acc = np.where(np.arange(400) < 300, _noise(400, 0.8), _noise(400, 0.3, seed=2))
    (cliff,) = detect_spikes(rows_to_run(_rows(400, acc=acc)), "acc")
    assert (cliff.kind, cliff.step) == ("cliff", 300.0)
    assert cliff.value == pytest.approx(0.3, rel=0.05)
    assert cliff.magnitude == pytest.approx(-0.62, abs=0.05)


def test_stall_needs_both_factor_and_floor() -> None:
    wall = np.cumsum(np.full(300, 1.0))
    wall[200:] += 60.0  # one 61 s gap
    wall[100:] += 4.0  # a 5 s gap: 5x the usual but under the 10 s floor
    run = rows_to_run(_rows(300, loss=_noise(300, 1.0), time=wall))
    (stall,) = detect_stalls(run)
    assert (stall.step, stall.end_step) == (199.0, 200.0)
    assert stall.value == pytest.approx(61.0)
    assert len(detect_stalls(run, floor_s=3.0)) == 2


def test_divergence_and_throughput_regression() -> None:
    n = 1000
    loss = np.concatenate([np.linspace(3, 1, 600), np.linspace(1, 4, 400)])
    wall = np.cumsum(np.where(np.arange(n) < 500, 1.0, 2.0))
    run = rows_to_run(_rows(n, loss=loss, time=wall))
    (div,) = detect_divergence(run, "loss")
    assert div.kind == "divergence"
    assert 550 <= div.step <= 650
    assert div.value > 3
    (slow,) = detect_throughput(run)
    assert slow.step == 500
    assert slow.magnitude == pytest.approx(2.0)


def test_nonfinite_and_missing_values() -> None:
    rows = _rows(50, loss=_noise(50, 1.0), scale=np.full(50, 1024.0))
    rows[30]["loss"] = float("inf")
    del rows[40]["loss"]
    rows[40]["scale"] = 512.0
    report = analyze([rows])
    got = {(f.kind, f.metric, f.step, f.severity) for f in report.findings}
    assert ("non_finite", "loss", 30.0, "error") in got
    assert ("missing_value", "loss", 40.0, "warning") in got


def test_spikes_at_the_same_step_in_two_runs_point_to_data_order() -> None:
    a, b = _noise(200, 1.0), _noise(200, 1.1, seed=3)
    a[150], b[151] = 5.0, 6.0
    report = analyze([_rows(200, loss=a), _rows(200, loss=b)])
    (rec,) = [f for f in report.findings if f.kind == "recurring_spike"]
    assert rec.runs == ["run0", "run1"]
    assert "data order" in rec.message


def test_metric_kinds() -> None:
    assert [
        metric_kind(m)
        for m in ("train/loss", "lm loss", "loss scale", "val_acc", "lr", "grad norm", "step_avg")
    ] == ["loss", "loss", "counter", "accuracy", "lr", "norm", "time"]


def test_custom_event_regex_explains_a_spike(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    lines = [f"step {s} loss {1.0 + (4.0 if s == 90 else 0.0):.3f}" for s in range(150)]
    lines.insert(86, "node gpu07 preempted, restarting dataloader")
    (tmp_path / "t.log").write_text("\n".join(lines) + "\n")
    report = analyze(tmp_path / "t.log", options=Options(event_patterns=["preempted"]))
    (spike,) = report.findings
    assert spike.event is not None
    assert spike.event.kind == "custom"
    assert spike.event.step == 85
