"""The detectors issue 11 asked for, each on a small series built to show it: overfitting, divergence (an
explosion, a climb after a recovered spike, a short climb, one the gradients confirm, an eval accuracy that
falls), an early explosion, recovery judged against the declaring baseline, a field's first appearance, jumps
right after saves, and the verdicts that must stay quiet (signed losses, eval noise, blips near the floor)."""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.metrics import analyze
from trainprobe.metrics.analyze import rows_to_run


def _kinds(rows: list[dict[str, float]]) -> list[tuple[str, str, int, str]]:
    return [(f.kind, f.metric, int(f.step), f.severity) for f in analyze([rows]).findings]


def _noise(n: int, seed: int = 0, scale: float = 0.01) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, scale, n)


def test_overfitting_train_falls_while_eval_rises() -> None:
    rows = []
    for e in range(30):
        row = {"epoch": float(e), "loss": 1.0 / (e + 1), "val_loss": 0.5 + abs(e - 8) * 0.02 + 0.001 * e}
        rows.append(row)
    got = [k for k in _kinds(rows) if k[0] == "overfitting"]
    assert got == [("overfitting", "val_loss", 9, "warning")]
    # the same rise while an eval accuracy of that set climbs: the model got better, no overfit
    for e, row in enumerate(rows):
        row["val_acc"] = 0.2 + 0.02 * e
    assert not [k for k in _kinds(rows) if k[0] == "overfitting"]


def test_divergence_explosion_that_never_comes_back() -> None:
    x = 0.5 * np.exp(-np.arange(200) / 50) + 0.02 + np.abs(_noise(200, scale=0.002))
    x[150:] = 10.0 ** (np.arange(50) / 5)  # lr jump: the loss explodes from 1 to 6e9
    got = [
        k
        for k in _kinds([{"step": float(s), "loss": float(v)} for s, v in enumerate(x)])
        if k[0] == "divergence"
    ]
    assert [(k[0], k[2]) for k in got] == [("divergence", 150)]


def test_divergence_after_a_recovered_spike() -> None:
    x = 1.0 + _noise(400)
    x[100] = 5.0  # a spike that recovers at once
    x[250:] = np.linspace(1.0, 30.0, 150)  # then a climb that stays
    findings = analyze([[{"step": float(s), "loss": float(v)} for s, v in enumerate(x)]]).findings
    kinds = {(f.kind, int(f.step)) for f in findings}
    assert ("spike", 100) in kinds
    assert any(k == "divergence" and 250 <= s <= 300 for k, s in kinds)


def test_short_climb_and_one_the_gradients_confirm() -> None:
    short = [6.37, 6.60, 7.31, 9.12, 10.24]
    assert [k[0] for k in _kinds([{"step": 6900 + 10 * i, "loss": v} for i, v in enumerate(short)])] == [
        "divergence"
    ]
    # fairseq's fp16 run: a mild rise, confirmed by the gradient norm and the loss scale
    rows = [
        {"step": 25, "loss": 16.46, "gnorm": 4.46, "loss_scale": 64},
        {"step": 2100, "loss": 8.73, "gnorm": 1.32, "loss_scale": 32},
        {"step": 2425, "loss": 9.56, "gnorm": 6.81, "loss_scale": 2},
        {"step": 2575, "loss": 9.78, "gnorm": 10.18, "loss_scale": 2},
    ]
    assert ("divergence", "loss", 2425, "error") in _kinds(rows)
    for row in rows:
        row["gnorm"] = 1.3
        row["loss_scale"] = 32
    assert not [k for k in _kinds(rows) if k[0] == "divergence"]


def test_eval_accuracy_that_falls_and_stays_down() -> None:
    acc = [83.0, 77.0, 75.0, 73.5, 70.0, 75.0, 72.0, 71.5, 73.5, 76.0]
    got = _kinds([{"step": float(e + 1), "val_accuracy": a} for e, a in enumerate(acc)])
    assert ("divergence", "val_accuracy", 2, "warning") in got
    # a training accuracy swings too much early on to call
    assert not _kinds([{"step": float(e + 1), "accuracy": a} for e, a in enumerate(acc)])


@pytest.mark.parametrize("with_grad", [True, False])
def test_early_explosion_in_the_first_steps(with_grad: bool) -> None:
    loss = [2.3, 2.9, 4.1, 7.5, 9.0, 8.8, 8.5, 8.0, 7.6, 7.0] + [6.0 - 0.01 * i for i in range(90)]
    rows = [{"step": float(s), "loss": v} for s, v in enumerate(loss)]
    if with_grad:
        for s, row in enumerate(rows):
            row["grad_norm"] = 1.0 if s == 0 else 40.0
    got = [k for k in _kinds(rows) if k[0] == "early_explosion"]
    # ×3.9: an explosion when the gradient norm corroborates it, not on the loss alone (YOLO from scratch)
    assert got == ([("early_explosion", "loss", 0, "error")] if with_grad else [])
    loss[3] = 40.0  # ×17 in the first steps: an explosion on its own
    assert [
        k
        for k in _kinds([{"step": float(s), "loss": v} for s, v in enumerate(loss)])
        if k[0] == "early_explosion"
    ]


def test_recovery_is_judged_against_the_baseline_that_declared_the_spike() -> None:
    """A loss falling fast: after the spike it lands below the baseline it spiked from. That is recovered
    (it once said "has not recovered by the end of the log")."""
    x = 3.0 * np.exp(-np.arange(300) / 150) + 0.1
    x[100] = 10.0
    (spike,) = [
        f
        for f in analyze([[{"step": float(s), "loss": float(v)} for s, v in enumerate(x)]]).findings
        if f.kind == "spike"
    ]
    assert spike.recovered_after == 1


def test_a_field_that_first_appears_later_is_not_missing() -> None:
    rows = [{"step": float(s), "loss": 1.0 + 0.01 * (s % 3), "lr": 0.1} for s in range(50)]
    for row in rows[25:]:
        row["val_loss"] = 1.1
    rows[40].pop("loss")  # a hole in the middle: that one is missing
    got = [k for k in _kinds(rows) if k[0] == "missing_value"]
    assert got == [("missing_value", "loss", 40, "warning")]


def test_jumps_right_after_saves_are_suspect() -> None:
    """A jump that would pass for noise (z ≈ 4 against a baseline made loose by earlier spikes) is a spike
    when it comes right after a checkpoint save."""
    x = 0.3 + _noise(300, seed=3, scale=0.05)
    x[150] = 0.55
    run = rows_to_run([{"step": float(s), "loss": float(v)} for s, v in enumerate(x)])
    assert not [f for f in analyze(run).findings if f.kind == "spike"]
    from trainprobe.metrics.events import CHECKPOINT_SAVE, Event

    run.events = [Event(CHECKPOINT_SAVE, 149.0, 150, text="Saving checkpoint", path="ckpt/step-149.pt")]
    (spike,) = [f for f in analyze(run).findings if f.kind == "spike"]
    assert spike.step == 150
    assert spike.event is not None
    assert spike.event.path == "ckpt/step-149.pt"


def test_quiet_where_a_careful_reader_is() -> None:
    n = 300
    signed = [{"step": float(s), "cri_loss": float(v)} for s, v in enumerate(_noise(n, scale=0.2))]
    signed[100]["cri_loss"] = 1.5  # an RL objective takes both signs: no ratios to judge
    assert not _kinds(signed)
    floor = [
        {"step": float(s), "loss": 2.3 * np.exp(-s / 20) + 0.015 + abs(float(_noise(1, s, 0.002)[0]))}
        for s in range(n)
    ]
    floor[250]["loss"] = 0.15  # ×10 near the floor, where the loss started at 2.3: batch noise
    assert all(sev == "info" for *_rest, sev in _kinds(floor))
    ev = [{"step": float(s), "val_loss": 1.0 + float(_noise(1, s)[0])} for s in range(0, n, 10)]
    ev[15]["val_loss"] = 3.0  # one evaluation off and back
    assert all(sev == "info" for *_rest, sev in _kinds(ev))


def test_a_spike_is_no_baseline_for_the_next_one() -> None:
    """Saves fifty steps apart that each upset the loss for ten steps: the tail of one jump widens the
    trailing window, and without taking it out the next, smaller jump would pass unseen."""
    x = 0.2 + _noise(200, seed=3, scale=0.03)
    for at, peak in ((51, 2.0), (101, 1.4)):
        x[at : at + 10] = 0.2 + (peak - 0.2) * np.exp(-np.arange(10) / 2.5)
    x[151:154] = [0.7, 0.55, 0.4]
    rows = [{"step": float(s), "loss": float(v)} for s, v in enumerate(x)]
    spikes = [(k[2], k[3]) for k in _kinds(rows) if k[0] == "spike"]
    assert [s for s, _sev in spikes] == [51, 101, 151]


def test_a_jump_that_settles_a_little_higher_is_a_spike_that_settled() -> None:
    x = 0.2 + _noise(120, seed=4, scale=0.005)
    x[60:64] = [0.95, 0.8, 0.6, 0.45]
    x[64:] += 0.06  # a torn save mutated the optimizer state: the loss stays 30 % higher (a cliff is ≥ 50 %)
    findings = analyze([[{"step": float(s), "loss": float(v)} for s, v in enumerate(x)]]).findings
    (spike,) = [f for f in findings if f.kind == "spike"]
    assert spike.step == 60
    assert spike.recovered_after is not None
    assert "came most of the way back" in spike.message
    assert not [f for f in findings if f.kind == "divergence"]
