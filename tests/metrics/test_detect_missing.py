"""A pass without a loss is not a hidden NaN: rows after the loss's last one (inference, an evaluation-only
pass, a closing summary) are missing values only with a sign of a skipped step, as on Megatron's last row; a
hole between two logged losses still is one."""

from __future__ import annotations

from trainprobe.metrics import analyze


def _missing(rows: list[dict[str, float]]) -> list[tuple[str, int]]:
    return [(f.metric, int(f.step)) for f in analyze([rows]).findings if f.kind == "missing_value"]


def _train(n: int) -> list[dict[str, float]]:
    return [
        {"step": float(s), "loss": 2.0 - 0.01 * s, "grad_norm": 1.0 + 0.01 * (s % 3), "loss_scale": 1024.0}
        for s in range(n)
    ]


def test_an_inference_pass_after_training_is_no_missing_loss() -> None:
    rows = _train(60)
    rows += [{"step": 60.0 + s, "grad_norm": 0.0, "loss_scale": 1024.0} for s in range(2)]
    assert _missing(rows) == []


def test_an_evaluation_pass_that_starts_its_steps_again_is_no_missing_loss() -> None:
    rows = _train(60) + [{"step": float(s), "grad_norm": 0.0, "loss_scale": 1024.0} for s in range(2)]
    assert _missing(rows) == []


def test_a_last_row_without_its_loss_and_with_a_cut_loss_scale_is_one() -> None:
    rows = _train(60)
    rows.append({"step": 60.0, "grad_norm": 1.0, "loss_scale": 512.0})
    assert _missing(rows) == [("loss", 60)]


def test_a_hole_between_two_losses_still_is_one() -> None:
    rows = _train(60)
    del rows[30]["loss"]
    assert _missing(rows) == [("loss", 30)]
