"""Adam, AdamW, AMSGrad, NAdam, RAdam (fused, foreach, and DCP/FSDP2 chunked state): ``exp_avg`` and
``exp_avg_sq`` per parameter.

Evidence: ``exp_avg_sq >= 0``; ``exp_avg == 0`` wherever ``exp_avg_sq == 0``; and the bound
``|m| <= (1-b1) / sqrt((1-b2)(1-b1^2/b2)) * sqrt(v)`` element-wise (Cauchy-Schwarz over the two moving
averages; 7.27 for betas 0.9/0.999, 1.165 for 0.9/0.95). It holds for every consistent (m, v) pair whatever
the gradients, clipping or weight decay; an ``m`` one step newer than its ``v`` breaks it by orders of
magnitude. Each pair is read once: the same pass counts both tensors' NaN/Inf for scan's numbers, and keeps
what :mod:`.adam_history` needs to hold the moments against their step counter (its largest ratio, whether
``v`` is zero everywhere). The evidence is :mod:`.adam_report`'s.

The family is certain only from its state keys *and* its param_groups' keys: ADOPT and LaProp (and others of
``pytorch-optimizer``) keep ``exp_avg``/``exp_avg_sq`` too, but their first moment averages g/sqrt(v), not g,
so the bound does not hold for them. A group with a key no known Adam writer sets makes the family unknown:
its pairs are not checked (a skip that names the keys), never a tear."""

from __future__ import annotations

import math
from collections.abc import Set
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainprobe.checkpoint.check.optimizers.adam_history import (
    all_zero,
    one_step_everywhere,
    one_step_ratio,
)
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.numerics import ChunkReleaser, NonFinite, NonFiniteTally, blocks, flat
from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.skeleton import as_float32, label_of, scalar

# Relative slack on the Adam bound for the rounding of m and v as stored (one ulp each, plus the square root).
_BOUND_RTOL = {"float64": 1e-9, "float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2}
_SMALLEST_SUBNORMAL = {"float64": 5e-324, "float32": 1.4e-45, "float16": 6e-8, "bfloat16": 9.2e-41}


#: The state keys of torch's Adam, AdamW, NAdam, RAdam (and AMSGrad), DeepSpeed's and apex's fused/CPU Adam.
ADAM_STATE_KEYS = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "mu_product", "step"})
#: The param_group keys those writers set, plus what torch's LR schedulers, DeepSpeed's ZeRO and trainers'
#: labels add: any other key means a writer whose first moment may not be Adam's.
ADAM_GROUP_KEYS = frozenset(
    {
        "params",
        "lr",
        "betas",
        "eps",
        "weight_decay",
        "amsgrad",
        "maximize",
        "foreach",
        "capturable",
        "differentiable",
        "fused",
        "decoupled_weight_decay",
        "momentum_decay",  # NAdam
        "bias_correction",  # DeepSpeed FusedAdam / DeepSpeedCPUAdam, apex
        "adam_w_mode",
        "step",  # fused Adams count steps per group
        "initial_lr",  # torch's LR schedulers
        "max_lr",
        "min_lr",
        "base_momentum",
        "max_momentum",
        "moe",  # DeepSpeed ZeRO
        "name",  # labels a trainer or script gives a group
        "names",
        "param_names",
        "lr_scale",
    }
)


def adam_group_doubt(group: dict[str, Any]) -> list[str]:
    """The keys of ``group`` that no known Adam writer sets (empty: the family is certain)."""
    return sorted(str(k) for k in group if k not in ADAM_GROUP_KEYS)


def adam_bound(beta1: float, beta2: float) -> float | None:
    """The largest |m|/sqrt(v) a consistent Adam state can reach; None when beta1^2 >= beta2 (no finite
    bound)."""
    if not (0.0 <= beta1 < 1.0 and 0.0 < beta2 < 1.0) or beta1 * beta1 >= beta2:
        return None
    return (1.0 - beta1) / math.sqrt((1.0 - beta2) * (1.0 - beta1 * beta1 / beta2))


@dataclass
class AdamPlan:
    """The (m, v) pairs of one optimizer to check, found from the skeleton alone (no tensor data read)."""

    label: str
    #: (name, m, v, the bound, beta1, beta2, step counter) of each pair: :func:`adam_pair`'s arguments
    jobs: list[tuple[str, TensorRecord, TensorRecord, float | None, float, float, float | None]] = field(
        default_factory=list
    )
    #: per job: (its parameter, its step counter — the state's, else its param_group's —, K of its betas)
    counters: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    bounds: set[float] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)
    results: list[Future[PairResult]] = field(default_factory=list)
    #: (pair name, the group keys that make its family uncertain): not checked
    uncertain: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass(frozen=True)
class PairResult:
    """What one pass over an (m, v) pair found: the Adam relations and both tensors' NaN/Inf counts."""

    name: str
    elements: int
    negative: int
    m_without_v: int
    outside: int
    worst: float
    m_nonfinite: NonFinite
    v_nonfinite: NonFinite
    #: m and v exactly zero in every element; |m|/sqrt(v) = (1-b1)/sqrt(1-b2) in every element (adam_history)
    zero: bool = False
    one_step: bool = False


def plan_adam(label: str, state: dict[Any, dict[str, Any]], owner: dict[str, dict[str, Any]]) -> AdamPlan:
    plan = AdamPlan(label)
    for pid, entry in state.items():
        group = owner.get(str(pid), {})
        counter = scalar(entry.get("step", group.get("step")))
        for name, m, v in _pairs(pid, entry):
            if _plan_pair(plan, name, m, v, group, counter):
                plan.counters.append((label_of(pid, entry), counter, one_step_ratio(*plan.jobs[-1][4:6])))
    return plan


def _pairs(pid: Any, entry: dict[str, Any]) -> list[tuple[str, TensorRecord, TensorRecord]]:
    """(name, m, v) of one parameter: one pair, or one per chunk for DCP/FSDP2 state saved in chunks (the
    reader lists a chunked tensor's chunks in order; m's and v's chunk alike)."""
    m, v = entry.get("exp_avg"), entry.get("exp_avg_sq")
    name = label_of(pid, entry)
    if isinstance(m, TensorRecord) and isinstance(v, TensorRecord):
        return [(name, m, v)]
    chunked = isinstance(m, list) and isinstance(v, list) and len(m) == len(v)
    if chunked and all(isinstance(x, TensorRecord) for x in (*m, *v)):  # type: ignore[misc]
        chunk = [x.name.rsplit("@", 1)[-1] for x in m]  # type: ignore[union-attr]
        return [(f"{name}@{c}", a, b) for c, a, b in zip(chunk, m, v, strict=True)]  # type: ignore[arg-type]
    return []


def _plan_pair(
    plan: AdamPlan, name: str, m: TensorRecord, v: TensorRecord, group: dict[str, Any], counter: float | None
) -> bool:
    """Whether the pair is a job of ``plan`` (else it is uncertain or skipped, with the reason)."""
    doubt = adam_group_doubt(group)
    if doubt:
        plan.uncertain.append((name, doubt))
        return False
    betas = group.get("betas")
    if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
        plan.skipped.append(f"{name}: no betas in its param_group")
        return False
    beta1, beta2 = float(betas[0]), float(betas[1])
    bound = adam_bound(beta1, beta2)
    if m.shape != v.shape or m.dtype not in _BOUND_RTOL or v.dtype not in _BOUND_RTOL:
        plan.skipped.append(f"{name}: exp_avg {m.dtype}{list(m.shape)}, exp_avg_sq {v.dtype}{list(v.shape)}")
        return False
    if bound is not None:
        plan.bounds.add(round(bound, 4))
    plan.jobs.append((name, m, v, bound, beta1, beta2, counter))
    return True


# v is finite and >= 0 exactly where its raw bits, read as an unsigned integer, are below the all-ones
# exponent (the sign bit would make them larger): one reduction over v instead of two.
_FINITE_NONNEGATIVE_BELOW = {
    "float64": (np.uint64, 0x7FF0_0000_0000_0000),
    "float32": (np.uint32, 0x7F80_0000),
    "float16": (np.uint16, 0x7C00),
    "bfloat16": (np.uint16, 0x7F80),
}
# Elements per chunk of the Adam pass: a chunk of m and v and the two float32 buffers reused for every chunk
# (4 MiB in all for float32) stay in the CPU's cache between the operations; measured fastest of 16 Ki..1 Mi.
_ADAM_CHUNK_ELEMS = 1 << 18


def adam_pair(
    name: str,
    m: TensorRecord,
    v: TensorRecord,
    bound: float | None,
    beta1: float,
    beta2: float,
    counter: float | None = None,
) -> PairResult:
    """The Adam relations of one pair and the NaN/Inf counts of both tensors, in one pass over their bytes.

    The ratio is sqrt(m² / (B²·v + atol²)): one division and no square root per element, into two float32
    buffers reused for every chunk. A chunk whose v is finite and >= 0 (one reduction over its bits) and whose
    largest ratio is within the bound needs nothing more: a NaN or Inf in m makes that ratio NaN or Inf, so
    both tensors are finite there. Only failing chunks take the slow path that tells the kinds of failure
    apart and counts NaN/+Inf/-Inf exactly as ``count_nonfinite`` does. Pages already checked leave the
    resident set as the pass goes, as in scan; :func:`_history` may read the pair once more.
    """
    rtol = max(_BOUND_RTOL[m.dtype], _BOUND_RTOL[v.dtype])
    # A gradient too small for its square to register in v's dtype leaves v == 0 and a tiny m; below this
    # |m| proves nothing.
    atol = math.sqrt(_SMALLEST_SUBNORMAL[v.dtype] / (1.0 - beta2)) * 2.0
    a2 = np.float32(atol * atol)
    c = np.float32((bound if bound is not None else 0.0) ** 2)
    limit = (1.0 + rtol) ** 2
    # The fast path divides m² by v + atol²/B² and scales by 1/B² once per chunk (one operation fewer per
    # element than the exact form); its float32 rounding is far below this margin, and a chunk within the
    # margin of the limit takes the slow path, which uses the exact form.
    a2_c = np.float32(a2 / c) if c > 0 else np.float32(0)
    fast_limit = limit * (1.0 - 1e-5)
    bits_type, bits_limit = _FINITE_NONNEGATIVE_BELOW[v.dtype]
    t = _PairTally()
    m_arr, v_arr = flat(m.array()), flat(v.array())
    m_bad, v_bad = NonFiniteTally(m), NonFiniteTally(v)
    m_free, v_free = ChunkReleaser(m, m_arr), ChunkReleaser(v, v_arr)
    chunk = min(_ADAM_CHUNK_ELEMS, max(1, m.numel))
    den_buf = np.empty(chunk, np.float32)
    r2_buf = np.empty(chunk, np.float32)
    pairs = zip(blocks(m_arr, chunk), blocks(v_arr, chunk), strict=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for (start, mb), (_t, vb) in pairs:
            size = mb.size
            if size == 0:
                continue
            mf = as_float32(m.dtype, mb).astype(np.float32, copy=False)
            vf = as_float32(v.dtype, vb).astype(np.float32, copy=False)
            if bound is not None and c > 0:
                v_top = int(vb.view(bits_type).max())
                v_ok = v_top < bits_limit
                t.v_zero = t.v_zero and (v_top == 0 or (not v_ok and not np.any(vf)))
                den = den_buf if size == chunk else den_buf[:size]
                r2 = r2_buf if size == chunk else r2_buf[:size]
                if mb.ndim != 1:
                    den, r2 = den.reshape(mb.shape), r2.reshape(mb.shape)
                np.add(vf, a2_c, out=den)
                np.multiply(mf, mf, out=r2)
                r2 /= den
                top = float(r2.max()) / float(c)
                if top <= fast_limit and (v_ok or float(vf.min()) >= 0):
                    t.worst2 = max(t.worst2, top)
                    if not v_ok:  # v holds +Inf or -0.0: count as count_nonfinite would
                        m_bad.add(start, mb)
                        v_bad.add(start, vb)
                    m_free.done(start, size)
                    v_free.done(start, size)
                    continue
            # Slow path: something in this chunk fails (or there is no finite bound); count each kind.
            m_bad.add(start, mb)
            v_bad.add(start, vb)
            t.slow_chunk(mf, vf, atol, a2 if bound is not None else None, c, limit)
            m_free.done(start, size)
            v_free.done(start, size)
    m_free.flush()
    v_free.flush()
    zero, one_step = _history(t, m, v, counter, float(c), beta1, beta2, rtol)
    m_nonfinite, v_nonfinite = m_bad.result(), v_bad.result()
    worst = math.sqrt(t.worst2)
    return PairResult(
        name, m.numel, t.negative, t.m_without_v, t.outside, worst, m_nonfinite, v_nonfinite, zero, one_step
    )


@dataclass
class _PairTally:
    """The running counts of one pair's pass (:func:`adam_pair`'s chunks)."""

    negative: int = 0
    m_without_v: int = 0
    outside: int = 0
    worst2: float = 0.0
    v_zero: bool = True  # v is +-0 in every element so far

    def slow_chunk(
        self, mf: np.ndarray, vf: np.ndarray, atol: float, a2: np.float32 | None, c: np.float32, limit: float
    ) -> None:
        """A chunk where something fails (or there is no finite bound, ``a2`` None): each kind counted."""
        self.v_zero = self.v_zero and not np.any(vf)
        self.negative += int(np.count_nonzero(vf < 0))
        self.m_without_v += int(np.count_nonzero((vf == 0) & (np.abs(mf) > atol)))
        if a2 is not None:
            positive = vf > 0
            r2 = np.where(positive, (mf * mf) / (vf * c + a2), 0.0)
            r2[~np.isfinite(r2)] = 0.0
            self.outside += int(np.count_nonzero(r2 > limit))
            self.worst2 = max(self.worst2, float(r2.max()))


def _history(
    t: _PairTally,
    m: TensorRecord,
    v: TensorRecord,
    counter: float | None,
    c: float,
    beta1: float,
    beta2: float,
    rtol: float,
) -> tuple[bool, bool]:
    """(zero, one_step) of a pair under a step ``counter``: both False unless the counter is 2 or more; a pair
    whose largest ratio is the one-step ratio, or whose v and m² are zero, is read once more
    (:mod:`.adam_history`)."""
    if counter is None or counter < 2:
        return False, False  # one step from zero (or none) is what a counter of at most 1 should hold
    if t.v_zero and t.worst2 == 0.0:
        return all_zero(m), False  # m² is zero to float32: m may still hold values below its resolution
    if not t.v_zero and c > 0 and not (t.negative or t.m_without_v or t.outside):
        # Only a pair whose largest ratio is the one-step ratio K can be one step from zero everywhere.
        k2 = (1.0 - beta1) ** 2 / (1.0 - beta2)
        if abs(t.worst2 * c / k2 - 1.0) <= rtol:
            return False, one_step_everywhere(m, v, k2, rtol)
    return False, False


class Adam:
    """The family entry: its evidence comes from the threaded pair pass (``plan_adam`` / ``report_adam``)."""

    name = "adam"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        # A key beyond Adam's (LaProp's exp_avg_lr_1, Lamb's trust_ratio) is another optimizer's state.
        return "exp_avg" in keys and "exp_avg_sq" in keys and keys <= ADAM_STATE_KEYS

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return []
