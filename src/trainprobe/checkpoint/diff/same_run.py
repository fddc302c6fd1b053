"""The same-run analysis of a diff: for two saves of one run (the optimizer settings agree), parameters that
did not move at all, and parameters whose optimizer step counter moved while the weights stayed identical (or
whose weights moved while the counter did not) — the trace of a save that mixed model and optimizer from
different steps. Where it cannot run (no weights, state that names no parameter), it says why.

Imports only the standard library, numpy and trainprobe.checkpoint (shipped to remote hosts).
"""

from __future__ import annotations

from typing import Protocol

from trainprobe.checkpoint.check.state import suffix_index
from trainprobe.checkpoint.diff.tensors import TensorDiff, logical_tensors
from trainprobe.checkpoint.reading.base import Checkpoint, Note
from trainprobe.checkpoint.reading.skeleton import find_optimizers, label_of, scalar


class SameRunFindings(Protocol):
    """What the same-run analysis fills in (a ``DiffReport``): the tensors compared, and its findings."""

    tensors: list[TensorDiff]
    steps: tuple[float | None, float | None]
    frozen: list[str]
    step_without_weights: list[str]
    weights_without_step: list[str]
    below_resolution: list[str]
    notes: list[Note]


_LOW_PRECISION = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


#: param_group entries a run changes as it goes (a scheduler's lr) or that only name things
_RUN_VARYING = frozenset({"lr", "initial_lr", "params", "param_names", "step"})


def _settings(ckpt: Checkpoint) -> list[dict[str, str]]:
    """Each param_group's fixed hyperparameters (betas, eps, weight_decay, ...), as text."""
    out = []
    for _where, opt in find_optimizers(ckpt.objects):
        for group in opt.get("param_groups") or []:
            if isinstance(group, dict):
                out.append(
                    {
                        str(k): repr(v)
                        for k, v in group.items()
                        if k not in _RUN_VARYING and isinstance(v, (bool, int, float, str, tuple, type(None)))
                    }
                )
    return out


def settings_changed(a: Checkpoint, b: Checkpoint) -> list[str]:
    """``key a -> b`` for each fixed hyperparameter that differs between the optimizers of ``a`` and ``b``;
    empty when they agree or cannot be paired group by group."""
    sa, sb = _settings(a), _settings(b)
    if not sa or len(sa) != len(sb):
        return []
    return sorted(
        {
            f"{k} {ga[k]} -> {gb[k]}"
            for ga, gb in zip(sa, sb, strict=True)
            for k in ga.keys() & gb.keys()
            if ga[k] != gb[k]
        }
    )


def _optimizer_steps(ckpt: Checkpoint) -> dict[str, float]:
    """param name -> its step counter, for optimizer state whose parameter the reader could name."""
    out: dict[str, float] = {}
    for _where, opt in find_optimizers(ckpt.objects):
        for pid, entry in opt["state"].items():
            if isinstance(entry, dict) and "step" in entry:
                value = scalar(entry["step"])
                if value is not None:
                    out[label_of(pid, entry)] = value
    return out


def same_run(a: Checkpoint, b: Checkpoint, report: SameRunFindings) -> None:
    state_names = {
        t.name
        for ck in (a, b)
        for t in logical_tensors(ck.records)
        if t.param_name is not None or ".state." in f".{t.name}."
    }
    weights = suffix_index({t.name: t for t in report.tensors if t.name not in state_names})
    params = [
        t
        for t in report.tensors
        if t.name not in state_names and t.status in ("identical", "changed") and _floating(t.dtype)
    ]
    if any(t.status == "changed" for t in params):
        report.frozen = [t.name for t in params if t.status == "identical" and t.shape]
    steps_a, steps_b = _optimizer_steps(a), _optimizer_steps(b)
    if steps_a:
        report.steps = (max(steps_a.values()), max(steps_b.values()) if steps_b else None)
    why_not = _why_not_compared(steps_a, steps_b, weights)
    if why_not is not None:
        report.notes.append(Note("same-run-not-run", why_not))
    for pname, sa in steps_a.items():
        sb = steps_b.get(pname)
        if sb is None or pname.startswith("state["):
            continue
        weight = weights.get(pname)
        if weight is None:
            continue
        if sb != sa and weight.status == "identical":
            line = f"{weight.name} (step {sa:g} -> {sb:g}, weights identical)"
            if weight.dtype in _LOW_PRECISION:
                report.below_resolution.append(f"{line}: the updates moved below {weight.dtype}'s resolution")
            else:
                report.step_without_weights.append(line)
        elif sb == sa and weight.status == "changed":
            report.weights_without_step.append(
                f"{weight.name} (step stays {sa:g}, weights changed by {weight.rel_change or 0:.3g})"
            )


def _why_not_compared(
    steps_a: dict[str, float], steps_b: dict[str, float], weights: dict[str, TensorDiff | None]
) -> str | None:
    """Why the same-run check (optimizer steps against the weights that moved) could not run, or None when it
    ran on at least one parameter: an analysis that cannot run is said, never passed over in silence."""
    if not steps_a or not steps_b:
        return None
    if not weights:
        return (
            "the same-run check did not run: these units hold optimizer state but no weights to compare its "
            "steps with"
        )
    named = [p for p in steps_a if not p.startswith("state[") and p in steps_b]
    if not named:
        return (
            f"the same-run check did not run: none of the {len(steps_a)} optimizer state entries could be "
            "tied to a parameter name (the model's parameters and the optimizer's do not pair one to one, "
            "e.g. a parameter saved under two names, as tied embeddings are)"
        )
    if not any(p in weights for p in named):
        return "the same-run check did not run: no optimizer state entry names a weight found in both units"
    return None


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "complex"))
