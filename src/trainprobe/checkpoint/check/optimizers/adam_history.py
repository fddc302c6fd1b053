"""Adam moments that do not fit their step counter (``moments-vs-counter``).

After one step from zero an Adam pair is ``m = (1-b1)·g``, ``v = (1-b2)·g²`` (what is stored: no bias
correction), so ``|m|/sqrt(v) = K = (1-b1)/sqrt(1-b2)`` in every element where ``g != 0`` (3.16 for betas
0.9/0.999); after N > 1 steps that holds in every element only if each element's gradient was exactly zero
before its last step (even a constant gradient gives ``(1-b1^N)/sqrt(1-b2^N)``). Moments exactly zero in
every element after N steps mean every gradient so far was exactly zero.

- Every pair of an optimizer whose counter says N >= 2 is at one step from zero, or zero, and at least one is
  at one step: torn — a fresh optimizer's moments under later counters (state re-initialised, or taken from
  a new optimizer). A healthy run cannot give that: every parameter's gradient would have to be exactly zero
  until its last step.
- Only some pairs at one step from zero, others with a history: a note (a layer behind a zero-initialised
  one, LoRA's ``A`` at step 2, a parameter first used at this step give that too).
- All-zero moments alone: a note (an unused parameter stepped on zero gradients, a DDP-unused one).

The pair pass (:func:`.adam.adam_pair`) keeps the largest ratio and whether ``v`` is zero everywhere; only a
pair whose largest ratio is ``K`` (or whose ``v`` and ``m²`` are zero) is read again here, so a healthy
state costs nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.numerics import ChunkReleaser, as_float, blocks, flat
from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.skeleton import as_float32

CHECK = "moments-vs-counter"
# Below this v is too close to underflow for its ratio to say anything (16 x the smallest normal).
_V_MIN = {"float64": 3.6e-307, "float32": 1.9e-37, "float16": 9.8e-4, "bfloat16": 1.9e-37}
_BLOCK = 1 << 20
MAX_NAMES = 8


def one_step_ratio(beta1: float, beta2: float) -> float | None:
    """``K = (1-b1)/sqrt(1-b2)``: |m|/sqrt(v) of every element one step from zero (None: no such betas)."""
    if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
        return None
    return (1.0 - beta1) / math.sqrt(1.0 - beta2)


def all_zero(rec: TensorRecord) -> bool:
    """Whether every element of ``rec`` is exactly zero (read again, pages released as it goes)."""
    arr = flat(rec.array())
    free = ChunkReleaser(rec, arr)
    try:
        for start, block in blocks(arr, _BLOCK):
            if np.count_nonzero(as_float(rec.dtype, block)):
                return False
            free.done(start, block.size)
        return True
    finally:
        free.flush()


def one_step_everywhere(m: TensorRecord, v: TensorRecord, k2: float, rtol: float) -> bool:
    """Whether m²/v equals ``k2`` within ``rtol`` in every element whose v is clear of underflow (at least
    one). In float32 (float64 for float64 state): where v is clear of underflow, m² is too."""
    m_arr, v_arr = flat(m.array()), flat(v.array())
    v_min = max(_V_MIN.get(v.dtype, 0.0), _V_MIN.get(m.dtype, 0.0))
    wide = np.float64 if "float64" in (m.dtype, v.dtype) else np.float32
    low, high = k2 * (1.0 - rtol), k2 * (1.0 + rtol)
    m_free, v_free = ChunkReleaser(m, m_arr), ChunkReleaser(v, v_arr)
    seen = 0
    try:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            for (start, mb), (_s, vb) in zip(blocks(m_arr, _BLOCK), blocks(v_arr, _BLOCK), strict=True):
                mf = as_float32(m.dtype, mb).astype(wide, copy=False)
                vf = as_float32(v.dtype, vb).astype(wide, copy=False)
                clear = vf >= v_min
                ratio = np.where(clear, mf * mf / vf, k2)
                if not bool(((ratio >= low) & (ratio <= high)).all()):
                    return False
                seen += int(np.count_nonzero(clear))
                m_free.done(start, mb.size)
                v_free.done(start, vb.size)
        return seen > 0
    finally:
        m_free.flush()
        v_free.flush()


@dataclass(frozen=True)
class PairHistory:
    """One checked pair as this evidence needs it: its parameter, counter, and what its moments are."""

    param: str
    counter: float | None
    zero: bool
    one_step: bool
    ratio: float | None  # K of its betas


def moments_evidence(label: str, pairs: list[PairHistory], skipped: list[str]) -> list[Evidence]:
    """The ``moments-vs-counter`` evidence of one optimizer's checked pairs (DCP chunks of one parameter
    merged: zero only if every chunk is, one step if every chunk is that or zero)."""
    merged: dict[str, PairHistory] = {}
    for p in pairs:
        seen = merged.get(p.param)
        if seen is not None:
            zero = seen.zero and p.zero
            one = (seen.one_step or seen.zero) and (p.one_step or p.zero) and not zero
            p = PairHistory(p.param, p.counter, zero, one, p.ratio or seen.ratio)
        merged[p.param] = p
    no_counter = [p.param for p in merged.values() if p.counter is None]
    judged = [p for p in merged.values() if p.counter is not None and p.counter >= 2]
    out = []
    if no_counter:
        out.append(
            Evidence(
                CHECK,
                "skip",
                f"{label}: {len(no_counter)} Adam state pair(s) keep no step counter (e.g. {no_counter[0]}): "
                "their moments are not held against one",
            )
        )
    if not judged:
        if merged and not no_counter:
            out.append(
                Evidence(CHECK, "skip", f"{label}: the counters say at most 1 step: nothing to hold against")
            )
        elif skipped and not merged:
            out.append(Evidence(CHECK, "skip", f"{label}: Adam state not checked: {skipped[0]}"))
        return out
    out.append(_judge(label, judged))
    return out


def _judge(label: str, judged: list[PairHistory]) -> Evidence:
    one = [p for p in judged if p.one_step]
    zero = [p for p in judged if p.zero]
    other = len(judged) - len(one) - len(zero)
    counters = sorted({p.counter for p in judged if p.counter is not None})
    said = _steps(counters)
    values: dict[str, Any] = {
        "counter": counters[0] if len(counters) == 1 else counters,
        "one_step": [p.param for p in one][:50],
        "zero": [p.param for p in zero][:50],
        "with_history": other,
    }
    ratios = "/".join(f"{r:.3g}" for r in sorted({p.ratio for p in one if p.ratio is not None}))
    one_text = (
        f"{len(one)} at one step from zero (|exp_avg|/sqrt(exp_avg_sq) = (1−β1)/sqrt(1−β2) = {ratios} in "
        f"every element, e.g. {one[0].param})"
        if one
        else ""
    )
    zero_text = (
        f"{len(zero)} with exp_avg and exp_avg_sq zero in every element (e.g. {zero[0].param})"
        if zero
        else ""
    )
    if one and not other:
        parts = one_text + (f", {zero_text}" if zero else "")
        return Evidence(
            CHECK,
            "fail",
            f"{label}: the moments are a fresh optimizer's while the step counters say {said}: of "
            f"{len(judged)} Adam state pair(s), {parts} — after {said} steps that needs every gradient to "
            "have been exactly zero until the last step; the state was re-initialised (or taken from a new "
            "optimizer) under later counters",
            indicates=V.TORN,
            tensors=[p.param for p in (one + zero)[:MAX_NAMES]],
            values=values,
        )
    notes = (
        (one, one_text, "each had exactly zero gradients before its last step (behind a zero-initialised "
         "layer, first used at this step) or its state was re-initialised; the others' moments have a "
         "history"),
        (zero, zero_text, "every gradient they saw was exactly zero (an unused parameter stepped on zero "
         "gradients) or their state was reset"),
    )  # fmt: skip
    for pairs, text, why in notes:
        if pairs:
            return Evidence(
                CHECK,
                "note",
                f"{label}: of {len(judged)} Adam state pair(s) with counters at {said}, {text}: {why}",
                tensors=[p.param for p in pairs[:MAX_NAMES]],
                values=values,
            )
    return Evidence(
        CHECK,
        "pass",
        f"{label}: {len(judged)} Adam state pair(s) with counters at {said}: none at zero or at one step "
        "from zero: the moments have the history their counters say",
        values=values,
    )


def _steps(counters: list[float]) -> str:
    text = [str(int(c)) if float(c).is_integer() else f"{c:g}" for c in counters]
    return text[0] if len(text) == 1 else f"{text[0]}..{text[-1]}"
