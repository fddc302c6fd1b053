"""Noise is not an event: a series whose median did not move is not diverging, an eval loss that zigzags
around its best is not overfitting, a series that jumps all the time gets one finding for its jumps, and the
jumps of several losses at one step are told once."""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.metrics import analyze
from trainprobe.metrics.analyze import rows_to_run
from trainprobe.metrics.detectors import detect_divergence, one_per_event
from trainprobe.metrics.findings import SPIKE, Finding


def _rows(**series: np.ndarray) -> list[dict[str, float]]:
    n = len(next(iter(series.values())))
    return [{"step": float(i), **{k: float(v[i]) for k, v in series.items()}} for i in range(n)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "noise",
    [
        lambda rng, n: 0.05 * rng.lognormal(0, 1.0, n),  # heavy-tailed: its lowest values are no level
        lambda rng, n: rng.exponential(0.1, n),
        lambda rng, n: 2 * np.exp(-np.arange(n) / 50) + 0.05 * rng.lognormal(0, 1.2, n),  # a fall, then noise
    ],
    ids=["lognormal", "exponential", "decay-then-noise"],
)
def test_noise_whose_median_did_not_move_is_not_diverging(noise: object, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    x = noise(rng, n)  # type: ignore[operator]
    grad = 1 + rng.lognormal(0, 1, n)  # a noisy gradient norm: its largest value is no growth
    assert detect_divergence(rows_to_run(_rows(loss=x, grad_norm=grad)), "loss") == []


def test_a_climb_beyond_the_noise_still_diverges() -> None:
    rng = np.random.default_rng(0)
    x = 0.05 * rng.lognormal(0, 1.0, 400)
    x[300:] = np.linspace(0.05, 3.0, 100) + 0.05 * rng.lognormal(0, 1.0, 100)
    (div,) = detect_divergence(rows_to_run(_rows(loss=x)), "loss")
    assert 290 <= div.step <= 340


def test_an_eval_loss_zigzagging_around_its_best_is_not_overfitting() -> None:
    """DETR's per-epoch test losses: the best is one low epoch among noisy ones, the train loss keeps falling.
    A steady rise after the best (timm's eval loss, 0.610 → 0.650 in even steps) is overfitting still."""
    train = np.linspace(8.0, 3.9, 27)
    zigzag = np.array([14.8, 9.0, 8.2, 7.7, 8.2, 7.1, 6.9, 7.8, 7.9, 6.3, 6.2, 6.6, 5.7, 5.9, 6.6, 8.3, 6.4,
                       5.6, 6.2, 5.5, 5.4, 5.1, 5.3, 5.9, 6.0, 5.3, 5.8])  # fmt: skip
    kinds = {f.kind for f in analyze([_rows(loss=train, test_loss=zigzag)]).findings}
    assert "overfitting" not in kinds
    steady = np.array([0.69, 0.67, 0.81, 0.64, 0.61, 0.617, 0.625, 0.632, 0.638, 0.644, 0.647, 0.650])
    kinds = {
        f.kind for f in analyze([_rows(train_loss=np.geomspace(0.7, 0.001, 12), eval_loss=steady)]).findings
    }
    assert "overfitting" in kinds


def test_a_series_that_jumps_all_the_time_gets_one_finding() -> None:
    rng = np.random.default_rng(1)
    x = 0.5 * rng.lognormal(0, 0.6, 300)  # jumps ×3 to ×7 every sixty rows: what this loss does
    findings = [f for f in analyze([_rows(loss=x)]).findings if f.kind == SPIKE]
    (folded,) = findings
    assert folded.severity == "info"
    assert "times between steps" in folded.message
    assert folded.end_step > folded.step  # it spans the jumps: each is still inside it


def test_a_jump_far_beyond_its_own_noise_keeps_its_finding() -> None:
    rng = np.random.default_rng(1)
    x = 0.5 * rng.lognormal(0, 0.6, 300)
    x[200] = 60.0  # ×120: not what this loss does
    spikes = [f for f in analyze([_rows(loss=x)]).findings if f.kind == SPIKE]
    assert ("error", 200.0) in {(f.severity, f.step) for f in spikes}


def test_jumps_after_saves_are_never_folded() -> None:
    """The demo's saves, fifty steps apart, each upset the loss: each is its own event."""
    from trainprobe.metrics.events import CHECKPOINT_SAVE, Event

    x = 0.3 + np.random.default_rng(3).normal(0, 0.01, 400)
    at = list(range(40, 400, 50))
    for s in at:
        x[s] = 1.2
    run = rows_to_run(_rows(loss=x))
    run.events = [Event(CHECKPOINT_SAVE, float(s - 1), s, text="Saving checkpoint") for s in at]
    spikes = [f for f in analyze(run).findings if f.kind == SPIKE]
    assert [int(f.step) for f in sorted(spikes, key=lambda f: f.step)] == at
    assert {f.severity for f in spikes} == {"error"}


def test_jumps_of_several_losses_at_one_step_are_one_event() -> None:
    def spike(metric: str, step: float, value: float) -> Finding:
        return Finding(SPIKE, "error", "run", metric, step, step, value=value, baseline=1.0, magnitude=value)

    found = [spike("loss_cls", 100, 3.0), spike("total_loss", 100, 5.0), spike("grad_norm", 101, 9.0)]
    found[2].severity = "warning"
    later = spike("total_loss", 400, 4.0)
    one_per_event([*found, later])
    assert [(f.metric, f.severity) for f in found] == [
        ("loss_cls", "info"),
        ("total_loss", "error"),
        ("grad_norm", "info"),
    ]
    assert "grad_norm, loss_cls jumped too" in found[1].message
    assert later.severity == "error"  # another step, another event


def test_the_losses_of_one_model_jumping_at_one_step_are_one_warning_in_the_report() -> None:
    """analyze folds the jumps several metrics make at one step into one finding (one_per_event)."""
    rng = np.random.default_rng(3)
    loss_a = 1.0 + 0.01 * rng.standard_normal(200)
    loss_b = 2.0 + 0.01 * rng.standard_normal(200)
    loss_a[120], loss_b[120] = 5.0, 9.0
    spikes = [f for f in analyze([_rows(loss_a=loss_a, loss_b=loss_b)]).findings if f.kind == SPIKE]
    assert len([f for f in spikes if f.severity != "info"]) == 1
    assert "jumped too" in next(f for f in spikes if f.severity != "info").message


def _restarts(paces: list[float], steps: int, noisy_term: bool = False) -> list[dict[str, float]]:
    """Runs appended to one file, each from step 10 in steps of 10, each at its own seconds per line, an
    hour apart; ``noisy_term``: a loss term that hops ×2 from line to line (a TTS model's S2S loss)."""
    rng = np.random.default_rng(0)
    rows: list[dict[str, float]] = []
    t = 0.0
    for pace in paces:
        t += 3600.0
        for k in range(steps):
            t += pace
            row = {"step": 10.0 * (k + 1), "time": t, "loss": 1.4 * 0.98**k + 0.01 * rng.random()}
            if noisy_term:
                row["s2s_loss"] = float(rng.choice([0.6, 1.5]))
            rows.append(row)
    return rows


def test_restarts_at_their_own_pace_are_no_stalls() -> None:
    """Each start is a run of its own: a start five times slower than the one before, or the hour between
    two starts (even when the next start writes the step the last one ended at), is no stall."""
    rows = _restarts([6.0, 30.0, 6.0, 30.0, 30.0, 6.0], 20)
    rows += _restarts([6.0], 1) + _restarts([30.0], 20)  # a start that got no further than its first line
    kinds = [f.kind for f in analyze([rows]).findings if f.severity != "info"]
    assert "stall" not in kinds


def test_a_stall_inside_one_start_is_still_found() -> None:
    rows = _restarts([6.0, 30.0, 6.0], 30)
    for row in rows[75:]:
        row["time"] += 600.0  # ten minutes without a line, in the third start
    (stall,) = [f for f in analyze([rows]).findings if f.kind == "stall"]
    assert (stall.step, stall.end_step) == (150.0, 160.0)


def test_short_starts_of_a_term_that_hops_from_line_to_line_are_no_spikes() -> None:
    """A few lines after each restart have no baseline; the short rule (a loss ×1.5 from one line to the
    next) is a spike only for a series that seldom does that elsewhere in the file."""
    rows = _restarts([6.0] * 8, 4, noisy_term=True) + _restarts([6.0], 30, noisy_term=True)
    assert not [f for f in analyze([rows]).findings if f.kind == SPIKE and f.severity != "info"]
    pasted = [2.0, 2.1, 2.0, 1.9, 2.0, 1.95, 5.0, 2.0, 1.9]  # a few pasted lines: the short rule holds
    rows = [{"step": float(i), "loss": v} for i, v in enumerate(pasted)]
    assert [f.step for f in analyze([rows]).findings if f.kind == SPIKE] == [6.0]


def test_an_evaluation_that_holds_up_training_is_a_stall_of_its_step() -> None:
    """Marian: the eval lines of update 5000 come 53 minutes after its train line, the next train line a
    minute later: the time the step's lines took counts (another line shape, not the step written again)."""
    rows: list[dict[str, float]] = []
    t = 0.0
    for k in range(1, 31):
        t += 80.0
        rows.append({"step": 500.0 * k, "time": t, "cost": 190.0 - k})
        if k == 10:
            t += 3200.0
            rows.append({"step": 500.0 * k, "time": t, "eval_bleu": 0.44})
    (stall,) = [f for f in analyze([rows]).findings if f.kind == "stall"]
    assert (stall.step, stall.end_step) == (5000.0, 5500.0)
