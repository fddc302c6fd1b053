"""Structural evidence about one optimizer: param_groups cover the state, per-parameter step counters agree
(with each other and with the checkpoint's step), state tensors are shaped like their parameters."""

from __future__ import annotations

import os
from typing import Any

from trainprobe.checkpoint.check.optimizers import family_of
from trainprobe.checkpoint.check.state import MAX_NAMES, param_record, suffix_index
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.reading.skeleton import label_of, scalar
from trainprobe.conventions import step_text


def check_optimizer(
    label: str,
    opt: dict[str, Any],
    state: dict[Any, dict[str, Any]],
    owner: dict[str, dict[str, Any]],
    coverage: list[str],
    ckpt: Checkpoint,
    ev: list[Evidence],
) -> None:
    """The structural evidence of one optimizer; its Adam evidence follows from ``report_adam``. Its
    counters against the unit's step are :func:`trainprobe.checkpoint.units.steps.judge_steps`' evidence."""
    if coverage:
        ev.append(Evidence("param-groups", "fail", f"{label}: " + "; ".join(coverage), indicates="corrupt"))
    elif state:
        ev.append(
            Evidence("param-groups", "pass", f"{label}: param_groups cover all {len(state)} state entries")
        )
    check_step_counters(label, state, ev, records=ckpt.records)
    check_shapes(label, state, ckpt, opt, ev)


def check_step_counters(
    label: str,
    state: dict[Any, dict[str, Any]],
    ev: list[Evidence],
    *,
    records: list[TensorRecord] | None = None,
) -> None:
    """Per-parameter step counters that disagree: the file mixes optimizer steps (torn), with every parameter
    of each step group and, where the write order splits them, the boundary. (Counters that agree are one
    step source: identity compares them with the unit's step.)"""
    counters: dict[float, list[str]] = {}
    written: list[tuple[tuple[str, int], float, str]] = []  # (write position, counter, parameter)
    for pid, entry in state.items():
        if "step" not in entry:
            continue
        value = scalar(entry["step"])
        if value is not None:
            counters.setdefault(value, []).append(label_of(pid, entry))
            position = write_position(entry["step"])
            if position is not None:
                written.append((position, value, label_of(pid, entry)))
    if len(counters) < 2:
        return
    ev.append(disagreeing_counters(label, counters, write_boundary(written, records or [])))


def disagreeing_counters(label: str, counters: dict[float, list[str]], boundary: str | None) -> Evidence:
    """The torn evidence of per-parameter step counters that disagree (``counters``: value -> the parameters
    that say so, two values or more); ``boundary``: where the write order splits them, when known."""
    parts = sorted(counters.items(), key=lambda kv: -len(kv[1]))
    desc = ", ".join(f"step {step_text(k)} in {len(v)} (e.g. {v[0]})" for k, v in parts[:4])
    return Evidence(
        "step-counters",
        "fail",
        f"{label}: per-parameter step counters disagree: {desc} — the file mixes optimizer steps"
        + (f"; {boundary}" if boundary else ""),
        indicates="torn",
        tensors=[v[0] for _k, v in parts[:MAX_NAMES]],
        values={
            "counters": {step_text(k): len(v) for k, v in parts},
            # every parameter of each step group, not a few examples
            "groups": {step_text(k): v for k, v in parts},
            "boundary": boundary,
        },
    )


def write_position(value: Any) -> tuple[str, int] | None:
    """Where a tensor's bytes were written: (its file, the byte offset). torch.save writes a zip's records in
    order, and each DCP rank writes its file front to back, so within a file this is the write order."""
    if isinstance(value, TensorRecord) and value.storage.file:
        return value.storage.file, value.storage.offset
    return None


def _position(record: TensorRecord, record_word: str = "record ") -> str:
    """A zip record by its key (``record data/110``); a DCP item by its byte offset and tensor."""
    key, file = record.storage.key, record.storage.file
    if file.endswith(".distcp") or not (key.startswith("data/") and key[5:].isdigit()):
        return f"byte {record.storage.offset:,} of {os.path.basename(file)} ({record.name})"
    return f"{record_word}{key}"


def write_boundary(
    written: list[tuple[tuple[str, int], float, str]], records: list[TensorRecord]
) -> str | None:
    """Where the optimizer stepped during the save. Files whose counters each hold one value but differ
    between files (DCP ranks) were written at different steps; inside a file, when every counter before some
    position holds one value and every one after holds the next, the step happened while the records
    between were written. None when the counters do not split that way."""
    if len({v for _p, v, _n in written}) != 2:
        return None
    by_file: dict[str, list[tuple[int, float, str]]] = {}
    for (file, offset), value, name in written:
        by_file.setdefault(file, []).append((offset, value, name))
    if len(by_file) > 1 and all(len({v for _o, v, _n in rows}) == 1 for rows in by_file.values()):
        said = ", ".join(
            f"{os.path.basename(f)} {step_text(rows[0][1])}" for f, rows in sorted(by_file.items())
        )
        return (
            f"each file's counters agree but the files differ ({said}): they were written at different steps"
        )
    split = [(f, sorted(rows)) for f, rows in by_file.items() if len({v for _o, v, _n in rows}) == 2]
    if len(split) != 1:
        return None
    file, order = split[0]
    first = order[0][1]
    cut = next(i for i, (_o, v, _n) in enumerate(order) if v != first)
    if any(v == first for _o, v, _n in order[cut:]):
        return None  # interleaved: not one boundary
    last_old, first_new = order[cut - 1][0], order[cut][0]
    at = {r.storage.offset: r for r in records if r.storage.file == file}
    old_rec, new_rec = at.get(last_old), at.get(first_new)
    between = sorted(
        (r for r in records if r.storage.file == file and last_old < r.storage.offset < first_new),
        key=lambda r: r.storage.offset,
    )
    writer = (
        f"rank file {os.path.basename(file)} was written" if file.endswith(".distcp") else "torch.save wrote"
    )
    during = (
        f": the optimizer stepped while {writer} {', '.join(r.display_name for r in between[:3])}"
        if between
        else ""
    )
    old_at = _position(old_rec) if old_rec else f"byte {last_old:,}"
    new_at = _position(new_rec, "") if new_rec else f"byte {first_new:,}"
    cut_at = step_text(order[cut][1])
    return f"counters read {step_text(first)} up to {old_at} and {cut_at} from {new_at}{during}"


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
