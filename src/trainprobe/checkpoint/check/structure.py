"""Structural evidence about one optimizer: param_groups cover the state, per-parameter step counters agree
(with each other and with the checkpoint's step), state tensors are shaped like their parameters."""

from __future__ import annotations

from typing import Any

from trainprobe.checkpoint.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.check.report import Evidence
from trainprobe.checkpoint.check.state import (
    MAX_NAMES,
    fmt_step,
    label_of,
    param_record,
    scalar,
    suffix_index,
)
from trainprobe.checkpoint.optimizers import family_of


def check_optimizer(
    label: str,
    opt: dict[str, Any],
    state: dict[Any, dict[str, Any]],
    owner: dict[str, dict[str, Any]],
    coverage: list[str],
    ckpt: Checkpoint,
    step_field: int | None,
    ev: list[Evidence],
    *,
    behind_is_stale: bool = False,
) -> None:
    """The structural evidence of one optimizer; its Adam evidence follows from ``report_adam``.
    ``behind_is_stale``: the framework steps the optimizer exactly once per counted step (no grad scaler),
    so counters behind the step mean a stale optimizer file."""
    if coverage:
        ev.append(Evidence("param-groups", "fail", f"{label}: " + "; ".join(coverage), indicates="corrupt"))
    elif state:
        ev.append(
            Evidence("param-groups", "pass", f"{label}: param_groups cover all {len(state)} state entries")
        )
    check_step_counters(label, state, step_field, ev, behind_is_stale=behind_is_stale, records=ckpt.records)
    check_shapes(label, state, ckpt, opt, ev)


def check_step_counters(
    label: str,
    state: dict[Any, dict[str, Any]],
    step_field: int | None,
    ev: list[Evidence],
    *,
    behind_is_stale: bool = False,
    records: list[TensorRecord] | None = None,
) -> None:
    counters: dict[float, list[str]] = {}
    written: list[tuple[int, float, str]] = []  # (record number, counter, parameter): the write order
    for pid, entry in state.items():
        if "step" not in entry:
            continue
        value = scalar(entry["step"])
        if value is not None:
            counters.setdefault(value, []).append(label_of(pid, entry))
            number = record_number(entry["step"])
            if number is not None:
                written.append((number, value, label_of(pid, entry)))
    if not counters:
        return
    n = sum(len(v) for v in counters.values())
    if len(counters) > 1:
        parts = sorted(counters.items(), key=lambda kv: -len(kv[1]))
        desc = ", ".join(f"step {fmt_step(k)} in {len(v)} (e.g. {v[0]})" for k, v in parts[:4])
        boundary = write_boundary(written, records or [])
        ev.append(
            Evidence(
                "step-counters",
                "fail",
                f"{label}: per-parameter step counters disagree: {desc} — the file mixes optimizer steps"
                + (f"; {boundary}" if boundary else ""),
                indicates="torn",
                tensors=[v[0] for _k, v in parts[:MAX_NAMES]],
                values={
                    "counters": {fmt_step(k): len(v) for k, v in parts},
                    # every parameter of each step group, not a few examples
                    "groups": {fmt_step(k): v for k, v in parts},
                },
            )
        )
        return
    (value,) = counters
    # The step field is taken when the save starts; a live save writes optimizer state later, so a tear leaves
    # the counters *ahead* of it. One step ahead is also what a step field counted from 0 looks like
    # (``for step in range(n)``), and counters behind it are what skipped AMP steps or a field counting
    # micro-batches look like: neither is evidence of a tear.
    if step_field is not None and value > step_field + 1:
        ev.append(
            Evidence(
                "step-counters",
                "fail",
                f"{label}: all {n} step counters say {fmt_step(value)} but the checkpoint's step is "
                f"{step_field} — the optimizer state was written {fmt_step(value - step_field)} steps after "
                "the rest: they come from different steps",
                indicates="torn",
                values={"counter": value, "step": step_field},
            )
        )
        return
    if step_field is not None and value == step_field + 1:
        ev.append(
            Evidence(
                "step-counters",
                "skip",
                f"{label}: all {n} step counters say {fmt_step(value)}, one ahead of the checkpoint's step "
                f"{step_field}: either the step field counts from 0, or the optimizer state was written one "
                "step after the model (a tear); one file cannot tell which",
                values={"ambiguous": True, "counter": value, "step": step_field},
            )
        )
        return
    if step_field is not None and value < step_field and behind_is_stale:
        ev.append(
            Evidence(
                "step-counters",
                "fail",
                f"{label}: all {n} step counters say {fmt_step(value)} but the checkpoint's step is "
                f"{step_field}: the optimizer state is {fmt_step(step_field - value)} steps older than the "
                "rest (a stale optimizer file)",
                indicates="torn",
                values={"counter": value, "step": step_field},
            )
        )
        return
    if step_field is not None and value < step_field:
        ev.append(
            Evidence(
                "step-counters",
                "pass",
                f"{label}: all {n} step counters equal ({fmt_step(value)}); behind the checkpoint's step "
                f"{step_field} (skipped AMP steps, or a step field that counts micro-batches)",
                values={"decisive": n > 1, "counter": value, "step": step_field},
            )
        )
        return
    also = f" = the checkpoint's step {step_field}" if step_field is not None else ""
    ev.append(
        Evidence(
            "step-counters",
            "pass",
            f"{label}: all {n} step counters equal ({fmt_step(value)}{also})",
            values={"decisive": n > 1 or step_field is not None, "counter": value},
        )
    )


def record_number(value: Any) -> int | None:
    """The number of the zip record (``data/113``) a tensor's bytes were written to; None elsewhere."""
    if isinstance(value, TensorRecord):
        key = value.storage.key
        if key.startswith("data/") and key[5:].isdigit():
            return int(key[5:])
    return None


def write_boundary(written: list[tuple[int, float, str]], records: list[TensorRecord]) -> str | None:
    """Where the optimizer stepped during the save: torch.save writes records in order, so when every
    counter before some record holds one value and every one after holds the next, the step happened while
    the records between were written. None when the counters do not split that way."""
    if len({v for _n, v, _p in written}) != 2:
        return None
    order = sorted(written)
    first = order[0][1]
    cut = next(i for i, (_n, v, _p) in enumerate(order) if v != first)
    if any(v == first for _n, v, _p in order[cut:]):
        return None  # interleaved: not one boundary
    last_old, first_new = order[cut - 1][0], order[cut][0]
    between = [
        r.display_name for r in records if (n := record_number(r)) is not None and last_old < n < first_new
    ]
    during = f": the optimizer stepped while torch.save wrote {', '.join(between[:3])}" if between else ""
    return (
        f"counters read {fmt_step(first)} up to record data/{last_old} and {fmt_step(order[cut][1])} from "
        f"data/{first_new}{during}"
    )


def check_shapes(
    label: str, state: dict[Any, dict[str, Any]], ckpt: Checkpoint, opt: dict[str, Any], ev: list[Evidence]
) -> None:
    params = suffix_index({r.name: r for r in ckpt.records if r.param_name is None})
    bad: list[str] = []
    checked = 0
    skipped: dict[str, int] = {}
    for pid, entry in state.items():
        family = family_of({k for k, v in entry.items() if v is not None} - {"step"})
        if family is None or not family.shaped_like_param:
            # Factored (Adafactor), quantized (8-bit) or unknown state: its shapes are not its parameter's.
            what = family.name if family is not None else "unknown"
            skipped[what] = skipped.get(what, 0) + 1
            continue
        tensors = {k: v for k, v in entry.items() if isinstance(v, TensorRecord) and v.shape != ()}
        shapes = {v.shape for v in tensors.values()}
        name = label_of(pid, entry)
        if len(shapes) > 1:
            bad.append(f"{name}: " + ", ".join(f"{k} {list(v.shape)}" for k, v in tensors.items()))
            continue
        param = param_record(name, params)
        if param is not None and shapes and param.shape not in shapes:
            bad.append(f"{name}: parameter {list(param.shape)}, state {list(next(iter(shapes)))}")
            continue
        checked += 1
    if bad:
        ev.append(
            Evidence(
                "state-shapes",
                "fail",
                f"{label}: {len(bad)} state entr(ies) not shaped like their parameter: {bad[0]}",
                indicates="corrupt",
                tensors=bad[:MAX_NAMES],
            )
        )
    elif checked:
        ev.append(Evidence("state-shapes", "pass", f"{label}: state tensors shaped like their parameters"))
    for what, count in skipped.items():
        ev.append(
            Evidence(
                "state-shapes",
                "skip",
                f"{label}: {count} {what} state entr(ies) not shape-checked "
                + (
                    "(an optimizer trainprobe does not know)"
                    if what == "unknown"
                    else "(not shaped like params)"
                ),
            )
        )
