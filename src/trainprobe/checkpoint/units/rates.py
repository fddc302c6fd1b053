"""The learning rate a unit records twice, and whether the two agree: a torch LR scheduler's ``_last_lr``
(what its last ``step()`` set) and its optimizer's ``param_groups[i]["lr"]`` (which that same ``step()``
wrote). Both change only together, so in one snapshot they are equal; a scheduler whose last rate is not its
optimizer's comes from another moment than the optimizer (a stale optimizer entry or file, a scheduler saved
at another step): ``scheduler-lr``, torn.

Compared only where the pairing is certain: one scheduler that records its last rates and one optimizer
with as many param groups in the unit (two optimizers with two schedulers — a GAN under Lightning — do not
say which drives which: skipped, with the reason). What the comparison cannot see: a loop that sets the rate
by hand after the scheduler stepped (then the two differ in a healthy unit; such a loop rarely keeps a torch
scheduler beside it).

Stdlib + numpy only (shipped with ``trainprobe.checkpoint``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Protocol

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.skeleton import fields_of, find_optimizers, scalar
from trainprobe.errors import CheckpointError


class PartFacts(Protocol):
    """What the rule reads of one part's facts (:class:`trainprobe.checkpoint.units.facts.PartFacts`, which
    imports this module's readers: a protocol keeps the two apart)."""

    path: str
    scheduler_lrs: list[tuple[str, list[float]]]
    optimizer_lrs: list[tuple[str, list[float]]]


# float32 lr tensors (a capturable optimizer's) against the float64 the scheduler kept
_REL_TOL = 1e-6


def rates_of(values: Any) -> list[float] | None:
    """A list of learning rates (plain numbers or one-element tensors); None when any is not one."""
    values = fields_of(values)
    if not isinstance(values, (list, tuple)) or not values:
        return None
    out = []
    for value in values:
        try:
            number = scalar(value)
        except (ValueError, TypeError, CheckpointError):
            return None
        if number is None:
            return None
        out.append(number)
    return out


def optimizer_rates(objects: Any) -> list[tuple[str, list[float]]]:
    """Each optimizer's param-group learning rates: (its dotted path, the rates)."""
    out = []
    for label, opt in find_optimizers(objects):
        groups = [fields_of(g) for g in opt["param_groups"]]
        rates = rates_of([g.get("lr") if isinstance(g, dict) else None for g in groups])
        if rates is not None:
            out.append((label, rates))
    return out


def _disagree(a: Sequence[float], b: Sequence[float]) -> int | None:
    """The first group whose rates differ, or None."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not math.isclose(x, y, rel_tol=_REL_TOL)),
        None,
    )


def rate_evidence(facts: Sequence[PartFacts]) -> list[Evidence]:
    """``scheduler-lr``: the scheduler's last rates against its optimizer's group rates, across the unit's
    parts (a scheduler.pt beside an optimizer.pt, or both in one file)."""
    schedulers = [(f, found) for f in facts for found in f.scheduler_lrs]
    optimizers = [(f, label, rates) for f in facts for label, rates in f.optimizer_lrs]
    if not schedulers or not optimizers:
        return []
    if len(schedulers) > 1 or len(optimizers) > 1:
        message = (
            f"{len(schedulers)} scheduler(s) and {len(optimizers)} optimizer(s): which scheduler drives "
            "which optimizer is not saved, so their learning rates are not compared"
        )
        return [Evidence("scheduler-lr", "skip", message)]
    (s_facts, (where, last)), (o_facts, label, groups) = schedulers[0], optimizers[0]
    s_name, o_name = _name(s_facts, where), _name(o_facts, label)
    if len(last) != len(groups):
        message = (
            f"{s_name} keeps {len(last)} rate(s) but {o_name} has {len(groups)} param group(s) (groups added "
            "after the scheduler was made): not compared"
        )
        return [Evidence("scheduler-lr", "skip", message)]
    values = {"scheduler": last, "optimizer": groups}
    off = _disagree(last, groups)
    if off is None:
        message = f"{s_name}'s last learning rate(s) {_show(last)} = {o_name}'s param-group lr"
        return [Evidence("scheduler-lr", "pass", message, values=values)]
    message = (
        f"{s_name} says its last step set lr {last[off]:.6g} but {o_name}'s param group {off} holds lr "
        f"{groups[off]:.6g}: a scheduler's step() sets both at once, so the optimizer and the scheduler "
        "come from different moments (a stale optimizer or scheduler)"
    )
    return [Evidence("scheduler-lr", "fail", message, indicates=V.TORN, values=values)]


def _name(part: PartFacts, where: str) -> str:
    file = os.path.basename(part.path)
    return file if where in ("", "<root>") else f"{file}: {where}"


def _show(rates: Sequence[float]) -> str:
    shown = ", ".join(f"{r:.6g}" for r in rates[:4])
    return f"[{shown}{', …' if len(rates) > 4 else ''}]"
