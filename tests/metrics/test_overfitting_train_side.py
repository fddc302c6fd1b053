"""Overfitting with the train side under an eval prefix: a log whose epoch line holds both losses
(PaddleSpeech's ``epoch: 5, train loss: 2.1, test loss: 8.2``) has its train loss read as ``eval/train loss``;
that is the train loss to pair the test loss with when the run has no other."""

from __future__ import annotations

from trainprobe.metrics import analyze
from trainprobe.metrics.findings import OVERFITTING

_TEST = [15.7, 11.0, 9.4, 8.6, 8.2, 8.19, 8.28, 8.82, 9.18, 9.72, 10.3, 10.9, 11.3, 12.0, 12.4]


def _overfits(train_name: str, train: list[float]) -> list[tuple[str, str, float]]:
    pairs = enumerate(zip(train, _TEST, strict=True))
    rows = [{"epoch": float(e), train_name: t, "test loss": v} for e, (t, v) in pairs]
    found = analyze([rows]).findings
    return [(f.metric, f.severity, f.step) for f in found if f.kind == OVERFITTING]


_FALLING = [80.8 * 0.6**e for e in range(len(_TEST))]


def test_an_eval_prefixed_train_loss_is_the_train_side() -> None:
    assert _overfits("eval/train loss", _FALLING) == [("test loss", "warning", 6.0)]


def test_an_eval_prefixed_train_underscore_loss_is_the_train_side_too() -> None:
    assert _overfits("eval/train_loss", _FALLING) == [("test loss", "warning", 6.0)]


def test_a_train_loss_that_rises_with_it_is_no_overfit() -> None:
    assert _overfits("eval/train loss", [1.0 + 0.1 * e for e in range(len(_TEST))]) == []
