"""Metric families judge their own series: an RL diagnostic that jumps ×15 is reported, a reward that climbs
and stays is a policy that learned, a collector's count and spread are no loss, and no spike is claimed
without a history to judge it against (a six-point log, the first rows of a stretch)."""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.metrics import analyze
from trainprobe.metrics.analyze import rows_to_run
from trainprobe.metrics.detectors import detect_spikes, family_of


def _rows(**series: np.ndarray) -> list[dict[str, float]]:
    n = len(next(iter(series.values())))
    return [{"step": float(i), **{k: float(v[i]) for k, v in series.items()}} for i in range(n)]


def _findings(rows: list[dict[str, float]]) -> list[tuple[str, str, int, str]]:
    return [(f.kind, f.metric, int(f.step), f.severity) for f in analyze([rows]).findings]


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("objective/kl", "rl"),
        ("approx_kl", "rl"),
        ("policy/entropy", "rl"),
        ("train/CrossEntropyLoss", "loss"),
        ("cross_entropy", "loss"),
        ("average reward score", "rl"),
        ("value_loss", "rl"),
        ("rollout/ep_rew_mean", "rl"),
        ("rew", "rl"),
        ("train/policy_gradient_loss", "rl"),
        ("crew_size", "other"),
        ("val_acc", "accuracy"),
        ("grad_norm", "norm"),
        ("learning_rate", "lr"),
        ("Loss/G/loss/num", "counter"),
        ("Loss/D/loss/std", "other"),
        ("Timing/maintenance_sec/mean", "time"),
        ("dev_cost", "loss"),
        ("train_avg_cost", "loss"),
    ],
)
def test_families_by_name(name: str, family: str) -> None:
    assert family_of(name).name == family


@pytest.mark.parametrize("metric", ["objective/kl", "rewards/mean"])
def test_an_rl_metric_rising_fifteenfold_is_reported(metric: str) -> None:
    x = 0.02 * (1 + np.random.default_rng(0).normal(0, 0.1, 200))
    x[120:123] = 0.3  # ×15 over its trailing median, for three rows, then back
    (spike,) = [f for f in analyze([_rows(**{metric: x})]).findings if f.kind == "spike"]
    assert (spike.step, spike.severity) == (120.0, "warning")
    assert spike.recovered_after is not None
    # as an accuracy, a reward's rise was "good" and passed unseen; as an RL metric both ways count
    x[120:123] = 0.08  # ×4: within what a healthy policy does
    assert not [f for f in analyze([_rows(**{metric: x})]).findings if f.severity != "info"]


def test_a_signed_reward_is_judged_on_its_typical_size() -> None:
    x = np.random.default_rng(1).normal(0, 0.05, 200)  # a reward around zero: no ratio to its median
    x[150] = 1.5  # ×30 its typical size
    (spike,) = [f for f in analyze([_rows(reward=x)]).findings if f.kind == "spike"]
    assert (spike.step, spike.severity) == (150.0, "warning")


def test_a_reward_that_climbs_and_stays_is_learning() -> None:
    x = np.concatenate([np.full(40, 0.1), np.full(40, 4.5)]) + np.random.default_rng(2).normal(0, 0.05, 80)
    got = _findings(_rows(**{"average reward score": x}))
    assert got
    assert all(sev == "info" for *_rest, sev in got)


def test_a_collectors_count_and_spread_are_no_loss() -> None:
    num = np.array([64.0] + [8000.0] * 59)  # samples per tick: the first tick is short
    std = 0.5 + np.random.default_rng(3).normal(0, 0.02, 60)
    std[30] = 1.2
    got = _findings(_rows(**{"Loss/G/loss/num": num, "Loss/G/loss/std": std}))
    assert all(sev == "info" for *_rest, sev in got)
    assert not [k for k in got if k[1] == "Loss/G/loss/num"]


def test_no_spike_in_a_six_point_log() -> None:
    loss = [0.9, 0.7, 0.65, 1.2, 0.6, 0.55]  # ×1.8 on one evaluation of six: no series to call it in
    assert not [k for k in _findings(_rows(val_loss=np.array(loss))) if k[0] == "spike"]
    longer = np.array([*loss, 0.52, 0.5, 0.5])  # nine: a short series, judged row to row
    assert ("spike", "val_loss", 3) in {k[:3] for k in _findings(_rows(val_loss=longer))}


def test_a_warming_baseline_takes_only_a_large_jump() -> None:
    """From the sixth row a baseline exists, but until the tenth only a jump twice as far out counts: ×35
    on the eighth row of a GAN loss is one, a 60 % wobble is not."""
    x = np.array([0.49, 0.42, 0.22, 0.40, 0.45, 0.47, 0.29, 16.1, 0.37] + [0.4] * 40)
    run = rows_to_run(_rows(G_B=x))
    (spike,) = detect_spikes(run, "G_B")
    assert spike.step == 7
    x[7] = 0.75
    assert detect_spikes(rows_to_run(_rows(G_B=x)), "G_B") == []
    x[3] = 30.0  # the fourth row: no history yet
    assert detect_spikes(rows_to_run(_rows(G_B=x)), "G_B") == []


def test_a_jump_on_the_last_row_is_judged_by_its_size() -> None:
    x = 1.0 + np.random.default_rng(4).normal(0, 0.01, 100)
    x[-1] = 1.8  # ×1.8 on the last row: nothing after it says whether it lasted
    (spike,) = [f for f in analyze([_rows(loss=x)]).findings if f.kind == "spike"]
    assert spike.severity == "warning"
    x[-1] = 4.0
    (spike,) = [f for f in analyze([_rows(loss=x)]).findings if f.kind == "spike"]
    assert spike.severity == "error"
