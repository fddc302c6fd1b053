"""Is a checkpoint one consistent snapshot? An evidence-based verdict per checkpoint, without torch.

A torn checkpoint mixes optimizer steps: ``torch.save`` copied storages one by one from live memory while
training
went on. Its bytes are fine; only relations *between* tensors show the tear. The evidence gathered here:

- **step counters**: every Adam-style parameter state has its own ``step``; in one snapshot they are all
equal, and
  equal to the checkpoint's own step field (``step`` / ``global_step``, or a CheckpointWriter manifest) if
  present.
- **Adam state**: ``exp_avg_sq >= 0``; ``exp_avg == 0`` wherever ``exp_avg_sq == 0``; and the bound
  ``|m| <= (1-b1) / sqrt((1-b2)(1-b1^2/b2)) * sqrt(v)`` element-wise (Cauchy-Schwarz over the two moving
  averages;
  7.27 for betas 0.9/0.999, 1.165 for 0.9/0.95). It holds for every consistent (m, v) pair whatever the
  gradients,
  clipping or weight decay; an ``m`` one step newer than its ``v`` breaks it by orders of magnitude.
- **structure**: state tensors shaped like their parameter and like each other; param_groups cover all state.
- **master weights**: where fp32 weights sit beside bf16/fp16 copies of the same tensor, the copy is their
cast.
- **container**: zip CRC32s and record sizes (the reader's ``verify``), DCP chunk coverage, HF index entries,
  the CheckpointWriter manifest (size, sha256, step).

What one file cannot show: a split that falls exactly between the model and the optimizer when no step field
exists (every relation inside each half holds); such a file is "consistent" as far as the evidence goes, and
``diff`` of two consecutive checkpoints is the way to see more. No optimizer state and no manifest: "unknown".

Everything here imports only the standard library, numpy and trainprobe.checkpoint (it is shipped to remote
hosts).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from trainprobe.checkpoint.base import Checkpoint, Opaque, TensorRecord
from trainprobe.checkpoint.check_containers import dcp_coverage_problems
from trainprobe.checkpoint.discover import discover
from trainprobe.checkpoint.formats import open_file
from trainprobe.checkpoint.numerics import (
    CHUNK_BYTES,
    NonFinite,
    all_finite,
    bad_mask,
    block_releaser,
    blocks,
    classify,
    count_nonfinite,
)
from trainprobe.errors import CheckpointError, CorruptCheckpointError, UsageError

SCHEMA_VERSION = 1
Verdict = Literal["consistent", "torn", "corrupt", "unknown", "unreadable"]
Outcome = Literal["pass", "fail", "skip"]

MANIFEST_SUFFIX = ".manifest.json"  # written by trainprobe.save.CheckpointWriter
MANIFEST_FORMAT = "trainprobe-checkpoint-writer"
_STEP_FIELDS = ("step", "global_step")
_CHUNK_ELEMS = 1 << 20
_MAX_NAMES = 8
# Relative slack on the Adam bound for the rounding of m and v as stored (one ulp each, plus the square root).
_BOUND_RTOL = {"float64": 1e-9, "float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2}
_SMALLEST_SUBNORMAL = {"float64": 5e-324, "float32": 1.4e-45, "float16": 6e-8, "bfloat16": 9.2e-41}
_LOW_PRECISION = ("bfloat16", "float16")
_WORKERS = min(8, (os.cpu_count() or 2) + 2)
T = TypeVar("T")


@dataclass
class Evidence:
    """One check and what it found. ``indicates`` is what a failure means: torn, corrupt or non-finite."""

    check: str
    outcome: Outcome
    message: str
    indicates: str | None = None
    tensors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "outcome": self.outcome,
            "indicates": self.indicates,
            "message": self.message,
            "tensors": self.tensors,
            "values": self.values,
        }


@dataclass
class CheckResult:
    path: str
    verdict: Verdict
    reason: str
    format: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    tensors: int = 0
    bytes: int = 0
    step: int | None = None
    nonfinite: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_finding(self) -> bool:
        return self.verdict in ("torn", "corrupt") or bool(self.nonfinite)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "verdict": self.verdict,
            "reason": self.reason,
            "step": self.step,
            "tensors": self.tensors,
            "bytes": self.bytes,
            "nonfinite": self.nonfinite,
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass
class CheckReport:
    results: list[CheckResult]

    @property
    def exit_code(self) -> int:
        """1 when any checkpoint is torn, corrupt or holds NaN/Inf; else 2 when one was unreadable; else 0."""
        if any(r.is_finding for r in self.results):
            return 1
        if any(r.verdict == "unreadable" for r in self.results):
            return 2
        return 0

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        return {
            "schema_version": SCHEMA_VERSION,
            "exit_code": self.exit_code,
            "summary": counts,
            "checkpoints": [r.to_json() for r in self.results],
        }


# -- entry points ----------------------------------------------------------------------------------


def check_paths(paths: Sequence[str]) -> CheckReport:
    """Check every checkpoint among ``paths``: files, directories (searched recursively, so a CheckpointWriter
    directory means all its checkpoints), DCP directories, HF index files and quoted globs."""
    if not paths:
        raise UsageError("nothing to check: give at least one checkpoint file, directory or glob")
    results = []
    for target in discover(list(paths)):
        if target.problem is not None:
            results.append(CheckResult(target.path, "unreadable", target.problem))
        else:
            results.append(check_path(target.path))
    return CheckReport(results)


def check_paths_json(paths: Sequence[str]) -> dict[str, Any]:
    """``check_paths`` as a JSON-ready dict: what ``check --on TARGET`` runs on the far side."""
    return check_paths(paths).to_json()


def check_path(path: str) -> CheckResult:
    """The verdict on one checkpoint. Never raises for a bad file: unreadable and corrupt are verdicts too."""
    evidence: list[Evidence] = []
    dcp = dcp_coverage_problems(path)
    if dcp is not None:
        problems, n = dcp
        if problems:
            evidence.append(
                Evidence(
                    "dcp-coverage",
                    "fail",
                    f"{len(problems)} chunk/file problem(s): {problems[0]}",
                    indicates="corrupt",
                    values={"problems": problems},
                )
            )
        else:
            evidence.append(
                Evidence(
                    "dcp-coverage",
                    "pass",
                    f"the chunks of all {n} tensors tile them; every data file present",
                )
            )
    try:
        ckpt = open_file(path)
    except CorruptCheckpointError as exc:
        evidence.append(Evidence("container", "fail", exc.reason, indicates="corrupt"))
        return _decide(CheckResult(path, "corrupt", "", evidence=evidence))
    except CheckpointError as exc:
        return CheckResult(path, "unreadable", str(exc))
    with ckpt:
        result = CheckResult(path, "unknown", "", format=ckpt.format, evidence=evidence)
        if ckpt.format == "hf-sharded":
            evidence.append(Evidence("hf-index", "pass", "every shard and tensor the index lists is present"))
        try:
            _check_open(ckpt, result)
        except CorruptCheckpointError as exc:
            evidence.append(Evidence("container", "fail", exc.reason, indicates="corrupt"))
    return _decide(result)


def check_checkpoint(ckpt: Checkpoint) -> CheckResult:
    """The verdict on an already opened checkpoint."""
    result = CheckResult(ckpt.path, "unknown", "", format=ckpt.format)
    _check_open(ckpt, result)
    return _decide(result)


def _check_open(ckpt: Checkpoint, result: CheckResult) -> None:
    # numpy and the CRC32 functions (zlib-ng or zlib) release the GIL on large buffers, so CRCs, NaN counts
    # and Adam checks overlap: verify() is submitted first and checks its records on threads of its own.
    with ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="trainprobe-check") as pool:
        _check_with(ckpt, result, pool)


def _check_with(ckpt: Checkpoint, result: CheckResult, pool: Executor) -> None:
    ev = result.evidence
    result.tensors = len(ckpt.records)
    result.bytes = sum(r.nbytes for r in ckpt.records)
    verified = pool.submit(ckpt.verify)
    optimizers = [(label, opt, *_state_of(opt)) for label, opt in _find_optimizers(ckpt.objects)]
    # Each (m, v) pair is read once: the Adam pass also counts both tensors' NaN/Inf, so the NaN pass skips
    # them.
    plans = [_plan_adam(label, state, owner) for label, _opt, state, owner, _cov in optimizers]
    fused: dict[int, tuple[Future[_PairResult], int]] = {}
    for plan in plans:
        for job in plan.jobs:
            future = pool.submit(_adam_pair, *job)
            plan.results.append(future)
            fused.setdefault(id(job[1]), (future, 0))
            fused.setdefault(id(job[2]), (future, 1))
    counts = [None if id(rec) in fused else pool.submit(count_nonfinite, rec) for rec in ckpt.records]
    step_field = _step_field(ckpt.objects)
    manifest = _check_manifest(ckpt, ev)
    if step_field is None and manifest is not None:
        step_field = manifest
    if step_field is None:
        step_field = _trainer_state_step(ckpt.path)
    result.step = step_field
    optimizer_ev: list[Evidence] = []
    for (label, opt, state, owner, coverage), plan in zip(optimizers, plans, strict=True):
        _check_optimizer(label, opt, state, owner, coverage, ckpt, step_field, optimizer_ev)
        _report_adam(plan, optimizer_ev)
    problems = verified.result()
    if problems:
        ev.append(
            Evidence(
                "container",
                "fail",
                f"{len(problems)} integrity problem(s): {problems[0]}",
                indicates="corrupt",
                values={"problems": problems[:50]},
            )
        )
    else:
        ev.append(
            Evidence("container", "pass", "zip CRC32s and record sizes match (where the format has them)")
        )
    found: list[NonFinite] = []
    for rec, count in zip(ckpt.records, counts, strict=True):
        if count is not None:
            found.append(count.result())
        else:
            pair, which = fused[id(rec)]
            done = pair.result()
            found.append(done.m_nonfinite if which == 0 else done.v_nonfinite)
    result.nonfinite = _nonfinite(ckpt.records, found)
    if result.nonfinite:
        first = result.nonfinite[0]
        ev.append(
            Evidence(
                "non-finite",
                "fail",
                f"{len(result.nonfinite)} tensor(s) hold NaN/Inf, e.g. {first['name']} "
                f"({first['nan']} NaN, {first['posinf']} +Inf, {first['neginf']} -Inf)",
                indicates="non-finite",
                tensors=[n["name"] for n in result.nonfinite[:_MAX_NAMES]],
            )
        )
    ev.extend(optimizer_ev)
    if not optimizers:
        ev.append(Evidence("optimizer-state", "skip", "no optimizer state in this checkpoint"))
    elif step_field is None:
        ev.append(
            Evidence(
                "model-vs-optimizer",
                "skip",
                "no step field: a split exactly between model weights and optimizer state would not show "
                "in one file (diff two consecutive checkpoints to see it)",
            )
        )
    _check_master_weights(ckpt.records, ev)


def _decide(result: CheckResult) -> CheckResult:
    fails = [e for e in result.evidence if e.outcome == "fail"]
    corrupt = [e for e in fails if e.indicates == "corrupt"]
    torn = [e for e in fails if e.indicates == "torn"]
    strong = [e for e in result.evidence if e.outcome == "pass" and e.values.get("decisive")]
    ambiguous = [e for e in result.evidence if e.values.get("ambiguous")]
    if torn:
        # A live save also breaks CRC32s (a storage changed between checksum and write), so torn evidence
        # wins: it names the cause.
        result.verdict, result.reason = "torn", torn[0].message
        if corrupt:
            result.reason += f" (and {corrupt[0].message})"
    elif corrupt:
        result.verdict, result.reason = "corrupt", corrupt[0].message
    elif ambiguous:
        result.verdict, result.reason = "unknown", ambiguous[0].message
    elif strong:
        result.verdict = "consistent"
        result.reason = "; ".join(e.message for e in strong[:2])
    else:
        result.verdict = "unknown"
        result.reason = (
            "no optimizer state or manifest: one file of weights alone cannot show a torn snapshot"
        )
    return result


# -- helpers over the skeleton ---------------------------------------------------------------------


def _fields(obj: Any) -> Any:
    return obj.fields() if isinstance(obj, Opaque) else obj


def _step_field(objects: Any) -> int | None:
    """The checkpoint's own step count: a top-level ``step`` / ``global_step`` integer."""
    objects = _fields(objects)
    if not isinstance(objects, dict):
        return None
    for key in _STEP_FIELDS:
        value = objects.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, TensorRecord) and value.numel == 1:
            number = _scalar(value)
            if number is not None and float(number).is_integer():
                return int(number)
    return None


def _trainer_state_step(path: str) -> int | None:
    """A Hugging Face Trainer checkpoint folder keeps ``global_step`` (optimizer steps) in trainer_state.json
    beside optimizer.pt, written in the same save."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        with open(os.path.join(folder, "trainer_state.json"), encoding="utf-8") as fh:
            value = json.load(fh).get("global_step")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _find_optimizers(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    obj = _fields(obj)
    if depth > 6:
        return
    if isinstance(obj, dict):
        if isinstance(obj.get("state"), dict) and isinstance(obj.get("param_groups"), list):
            yield path or "<root>", obj
            return
        for key, value in obj.items():
            yield from _find_optimizers(value, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _find_optimizers(value, f"{path}.{i}" if path else str(i), depth + 1)


def _scalar(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, TensorRecord) and value.numel == 1 and value.dtype_info is not None:
        arr = value.array().reshape(1)
        return float(_as_float32(value.dtype, arr)[0])
    return None


def _as_float32(dtype: str, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if dtype == "bfloat16":
        out: np.ndarray[Any, Any] = (arr.astype(np.uint32) << 16).view(np.float32)
        return out
    if arr.dtype.kind in "iub":
        return arr.astype(np.float64)
    return arr


def _label(pid: Any, entry: dict[str, Any]) -> str:
    for value in entry.values():
        if isinstance(value, TensorRecord) and value.param_name:
            return value.param_name
    return f"state[{pid}]"


# -- non-finite ------------------------------------------------------------------------------------


def _nonfinite(records: list[TensorRecord], counts: list[NonFinite]) -> list[dict[str, Any]]:
    out = []
    for rec, bad in zip(records, counts, strict=True):
        if bad.total:
            out.append(
                {
                    "name": rec.name,
                    "nan": bad.nan,
                    "posinf": bad.posinf,
                    "neginf": bad.neginf,
                    "first_bad_index": list(bad.first_bad_index) if bad.first_bad_index else None,
                }
            )
    return out


# -- manifest --------------------------------------------------------------------------------------


def _check_manifest(ckpt: Checkpoint, ev: list[Evidence]) -> int | None:
    """Validate a CheckpointWriter manifest beside the file; returns the manifest's step."""
    path = ckpt.path
    mpath = path + MANIFEST_SUFFIX
    if not os.path.isfile(path) or not os.path.isfile(mpath):
        return None
    try:
        with open(mpath, encoding="utf-8") as fh:
            manifest = json.load(fh)
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError("not a trainprobe manifest")
        step, digest, size = int(manifest["step"]), str(manifest["sha256"]), int(manifest["bytes"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        ev.append(
            Evidence("manifest", "fail", f"manifest {mpath} is unreadable ({exc})", indicates="corrupt")
        )
        return None
    problems = []
    actual_size = os.path.getsize(path)
    if actual_size != size:
        problems.append(f"file has {actual_size} bytes, manifest says {size}")
    else:
        sha = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                sha.update(chunk)
        if sha.hexdigest() != digest:
            problems.append("sha256 differs from the manifest's: the file changed after it was written")
    if manifest.get("file") not in (None, os.path.basename(path)):
        problems.append(f"manifest describes {manifest.get('file')}, not {os.path.basename(path)}")
    own_step = _step_field(ckpt.objects)
    if own_step is not None and own_step != step:
        problems.append(f"checkpoint says step {own_step}, manifest says {step}")
    if problems:
        ev.append(Evidence("manifest", "fail", "manifest: " + "; ".join(problems), indicates="corrupt"))
    else:
        ev.append(
            Evidence(
                "manifest",
                "pass",
                f"CheckpointWriter manifest matches (step {step}, sha256 {digest[:12]}…)",
                values={"decisive": True, "step": step},
            )
        )
    return step


# -- optimizer state -------------------------------------------------------------------------------


def adam_bound(beta1: float, beta2: float) -> float | None:
    """The largest |m|/sqrt(v) a consistent Adam state can reach; None when beta1^2 >= beta2 (no finite
    bound)."""
    if not (0.0 <= beta1 < 1.0 and 0.0 < beta2 < 1.0) or beta1 * beta1 >= beta2:
        return None
    return (1.0 - beta1) / math.sqrt((1.0 - beta2) * (1.0 - beta1 * beta1 / beta2))


def _group_of(opt: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """param id -> its param_group, and the problems with the groups' coverage of the state."""
    owner: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for gi, group in enumerate(opt["param_groups"]):
        group = _fields(group)
        if not isinstance(group, dict):
            continue
        params = group.get("params")
        for pid in params if isinstance(params, list) else []:
            if str(pid) in owner:
                problems.append(f"parameter {pid} is in more than one param_group (again in group {gi})")
            owner[str(pid)] = group
    missing = [str(pid) for pid in opt["state"] if str(pid) not in owner]
    if missing:
        problems.append(f"{len(missing)} state entr(ies) belong to no param_group, e.g. {missing[0]}")
    return owner, problems


def _state_of(
    opt: dict[str, Any],
) -> tuple[dict[Any, dict[str, Any]], dict[str, dict[str, Any]], list[str]]:
    """An optimizer's per-parameter state entries, each parameter's param_group, and coverage problems."""
    state = {pid: _fields(entry) for pid, entry in opt["state"].items()}
    state = {pid: entry for pid, entry in state.items() if isinstance(entry, dict)}
    owner, coverage = _group_of(opt)
    return state, owner, coverage


def _check_optimizer(
    label: str,
    opt: dict[str, Any],
    state: dict[Any, dict[str, Any]],
    owner: dict[str, dict[str, Any]],
    coverage: list[str],
    ckpt: Checkpoint,
    step_field: int | None,
    ev: list[Evidence],
) -> None:
    """The structural evidence of one optimizer; its Adam evidence follows from ``_report_adam``."""
    if coverage:
        ev.append(Evidence("param-groups", "fail", f"{label}: " + "; ".join(coverage), indicates="corrupt"))
    elif state:
        ev.append(
            Evidence("param-groups", "pass", f"{label}: param_groups cover all {len(state)} state entries")
        )
    _check_step_counters(label, state, step_field, ev)
    _check_shapes(label, state, ckpt, opt, ev)


def _check_step_counters(
    label: str, state: dict[Any, dict[str, Any]], step_field: int | None, ev: list[Evidence]
) -> None:
    counters: dict[float, list[str]] = {}
    for pid, entry in state.items():
        if "step" not in entry:
            continue
        value = _scalar(entry["step"])
        if value is not None:
            counters.setdefault(value, []).append(_label(pid, entry))
    if not counters:
        return
    n = sum(len(v) for v in counters.values())
    if len(counters) > 1:
        parts = sorted(counters.items(), key=lambda kv: -len(kv[1]))
        desc = ", ".join(f"step {_fmt(k)} in {len(v)} (e.g. {v[0]})" for k, v in parts[:4])
        ev.append(
            Evidence(
                "step-counters",
                "fail",
                f"{label}: per-parameter step counters disagree: {desc} — the file mixes optimizer steps",
                indicates="torn",
                tensors=[v[0] for _k, v in parts[:_MAX_NAMES]],
                values={"counters": {_fmt(k): len(v) for k, v in parts}},
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
                f"{label}: all {n} step counters say {_fmt(value)} but the checkpoint's step is "
                f"{step_field} — the optimizer state was written {_fmt(value - step_field)} steps after the "
                "rest: they come from different steps",
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
                f"{label}: all {n} step counters say {_fmt(value)}, one ahead of the checkpoint's step "
                f"{step_field}: either the step field counts from 0, or the optimizer state was written one "
                "step after the model (a tear); one file cannot tell which",
                values={"ambiguous": True, "counter": value, "step": step_field},
            )
        )
        return
    if step_field is not None and value < step_field:
        ev.append(
            Evidence(
                "step-counters",
                "pass",
                f"{label}: all {n} step counters equal ({_fmt(value)}); behind the checkpoint's step "
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
            f"{label}: all {n} step counters equal ({_fmt(value)}{also})",
            values={"decisive": n > 1 or step_field is not None, "counter": value},
        )
    )


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _check_shapes(
    label: str, state: dict[Any, dict[str, Any]], ckpt: Checkpoint, opt: dict[str, Any], ev: list[Evidence]
) -> None:
    params = suffix_index({r.name: r for r in ckpt.records if r.param_name is None})
    bad: list[str] = []
    checked = 0
    for pid, entry in state.items():
        tensors = {k: v for k, v in entry.items() if isinstance(v, TensorRecord) and v.shape != ()}
        shapes = {v.shape for v in tensors.values()}
        name = _label(pid, entry)
        if len(shapes) > 1:
            bad.append(f"{name}: " + ", ".join(f"{k} {list(v.shape)}" for k, v in tensors.items()))
            continue
        param = _param_record(name, params)
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
                tensors=bad[:_MAX_NAMES],
            )
        )
    elif checked:
        ev.append(Evidence("state-shapes", "pass", f"{label}: state tensors shaped like their parameters"))


def suffix_index(items: dict[str, T]) -> dict[str, T | None]:
    """Every dotted suffix of every name (``model.fc.weight``: itself, ``fc.weight``, ``weight``) to its item;
    a suffix shared by two names maps to None (ambiguous). Built once: O(names × depth)."""
    index: dict[str, T | None] = {}
    for name, item in items.items():
        parts = name.split(".")
        for i in range(len(parts)):
            key = ".".join(parts[i:])
            index[key] = item if key not in index or i == 0 else None
    for name, item in items.items():
        index[name] = item  # an exact name always wins
    return index


def _param_record(name: str, index: dict[str, TensorRecord | None]) -> TensorRecord | None:
    if name.startswith("state["):
        return None
    return index.get(name)


@dataclass
class _AdamTally:
    checked: int = 0
    elements: int = 0
    negative_v: list[str] = field(default_factory=list)
    m_without_v: list[str] = field(default_factory=list)
    outside: list[tuple[float, str, int]] = field(default_factory=list)
    worst: float = 0.0
    skipped: list[str] = field(default_factory=list)


@dataclass
class _AdamPlan:
    """The (m, v) pairs of one optimizer to check, found from the skeleton alone (no tensor data read)."""

    label: str
    jobs: list[tuple[str, TensorRecord, TensorRecord, float | None, float]] = field(default_factory=list)
    bounds: set[float] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)
    results: list[Future[_PairResult]] = field(default_factory=list)


@dataclass(frozen=True)
class _PairResult:
    """What one pass over an (m, v) pair found: the Adam relations and both tensors' NaN/Inf counts."""

    name: str
    elements: int
    negative: int
    m_without_v: int
    outside: int
    worst: float
    m_nonfinite: NonFinite
    v_nonfinite: NonFinite


def _plan_adam(label: str, state: dict[Any, dict[str, Any]], owner: dict[str, dict[str, Any]]) -> _AdamPlan:
    plan = _AdamPlan(label)
    for pid, entry in state.items():
        m, v = entry.get("exp_avg"), entry.get("exp_avg_sq")
        if not (isinstance(m, TensorRecord) and isinstance(v, TensorRecord)):
            continue
        name = _label(pid, entry)
        group = owner.get(str(pid), {})
        betas = group.get("betas")
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            plan.skipped.append(f"{name}: no betas in its param_group")
            continue
        beta1, beta2 = float(betas[0]), float(betas[1])
        bound = adam_bound(beta1, beta2)
        if m.shape != v.shape or m.dtype not in _BOUND_RTOL or v.dtype not in _BOUND_RTOL:
            plan.skipped.append(
                f"{name}: exp_avg {m.dtype}{list(m.shape)}, exp_avg_sq {v.dtype}{list(v.shape)}"
            )
            continue
        if bound is not None:
            plan.bounds.add(round(bound, 4))
        plan.jobs.append((name, m, v, bound, beta2))
    return plan


def _report_adam(plan: _AdamPlan, ev: list[Evidence]) -> None:
    label, bounds = plan.label, plan.bounds
    tally = _AdamTally(skipped=plan.skipped)
    for future in plan.results:
        pair = future.result()
        tally.checked += 1
        tally.elements += pair.elements
        tally.worst = max(tally.worst, pair.worst)
        if pair.negative:
            tally.negative_v.append(pair.name)
        if pair.m_without_v:
            tally.m_without_v.append(pair.name)
        if pair.outside:
            tally.outside.append((pair.worst, pair.name, pair.outside))
    if not tally.checked:
        if tally.skipped:
            ev.append(Evidence("adam-bound", "skip", f"{label}: Adam state not checked: {tally.skipped[0]}"))
        return
    where = f"{label}: {tally.checked} Adam state pairs, {tally.elements:,} elements"
    if tally.negative_v:
        ev.append(
            Evidence(
                "exp-avg-sq-nonnegative",
                "fail",
                f"{label}: exp_avg_sq < 0 in {len(tally.negative_v)} tensor(s), e.g. {tally.negative_v[0]} — "
                "a squared-gradient average cannot be negative",
                indicates="corrupt",
                tensors=tally.negative_v[:_MAX_NAMES],
            )
        )
    else:
        ev.append(Evidence("exp-avg-sq-nonnegative", "pass", f"{where}: exp_avg_sq >= 0 everywhere"))
    if tally.m_without_v:
        ev.append(
            Evidence(
                "exp-avg-zero",
                "fail",
                f"{label}: exp_avg != 0 where exp_avg_sq == 0 in {len(tally.m_without_v)} tensor(s), e.g. "
                f"{tally.m_without_v[0]} — the first moment has seen a gradient the second has not",
                indicates="torn",
                tensors=tally.m_without_v[:_MAX_NAMES],
            )
        )
    else:
        ev.append(Evidence("exp-avg-zero", "pass", f"{where}: exp_avg == 0 wherever exp_avg_sq == 0"))
    bound_text = "/".join(f"{b:.3g}" for b in sorted(bounds)) or "none"
    if tally.outside:
        tally.outside.sort(reverse=True)
        ratio, name, count = tally.outside[0]
        ev.append(
            Evidence(
                "adam-bound",
                "fail",
                f"{label}: |exp_avg| exceeds the Adam bound ({bound_text}·sqrt(exp_avg_sq)) in "
                f"{len(tally.outside)} tensor(s); worst {name}: {ratio:.3g}× the bound, {count:,} element(s) "
                "outside — m and v come from different steps",
                indicates="torn",
                tensors=[n for _r, n, _c in tally.outside[:_MAX_NAMES]],
                values={"worst_ratio_to_bound": ratio, "bound": sorted(bounds)},
            )
        )
    else:
        ev.append(
            Evidence(
                "adam-bound",
                "pass",
                f"{where}: |exp_avg| <= {bound_text}·sqrt(exp_avg_sq) everywhere "
                f"(largest ratio to the bound {tally.worst:.3f})",
                values={"decisive": True, "worst_ratio_to_bound": tally.worst, "bound": sorted(bounds)},
            )
        )


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


class _NonFiniteTally:
    """count_nonfinite's counts, gathered chunk by chunk inside another pass over the same tensor."""

    def __init__(self, record: TensorRecord) -> None:
        self.record = record
        self.nan = self.posinf = self.neginf = 0
        self.first: int | None = None

    def add(self, start: int, block: np.ndarray[Any, Any]) -> None:
        dtype = self.record.dtype
        if all_finite(dtype, block):
            return
        a, b, c = classify(dtype, block)
        self.nan, self.posinf, self.neginf = self.nan + a, self.posinf + b, self.neginf + c
        if self.first is None:
            self.first = start + int(np.flatnonzero(bad_mask(dtype, block))[0])

    def result(self) -> NonFinite:
        first = self.first
        index = None if first is None else tuple(int(i) for i in np.unravel_index(first, self.record.shape))
        return NonFinite(self.nan, self.posinf, self.neginf, index)


class _Releaser:
    """Drops the pages of a tensor's elements already checked from the resident set, a few MiB at a time
    (numerics' page releaser does the page arithmetic: whole pages only, shared ones kept)."""

    def __init__(self, record: TensorRecord, arr: np.ndarray[Any, Any]) -> None:
        self._release = block_releaser(record, arr)
        self._every = max(1, CHUNK_BYTES // max(1, arr.itemsize))
        self._start = self._end = 0

    def done(self, start: int, count: int) -> None:
        if start != self._end:
            self.flush()
            self._start = start
        self._end = start + count
        if self._end - self._start >= self._every:
            self.flush()

    def flush(self) -> None:
        if self._end > self._start:
            self._release(self._start, self._end - self._start)
        self._start = self._end


def _flat(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A contiguous tensor as a 1-D view (cheaper chunks); any other as it is (never copied)."""
    return arr.reshape(-1) if arr.flags.c_contiguous else arr


def _adam_pair(name: str, m: TensorRecord, v: TensorRecord, bound: float | None, beta2: float) -> _PairResult:
    """The Adam relations of one pair and the NaN/Inf counts of both tensors, in one pass over their bytes.

    The ratio is sqrt(m² / (B²·v + atol²)): one division and no square root per element, into two float32
    buffers reused for every chunk. A chunk whose v is finite and >= 0 (one reduction over its bits) and whose
    largest ratio is within the bound needs nothing more: a NaN or Inf in m makes that ratio NaN or Inf, so
    both tensors are finite there. Only failing chunks take the slow path that tells the kinds of failure
    apart and counts NaN/+Inf/-Inf exactly as ``count_nonfinite`` does. Pages already checked leave the
    resident set as the pass goes, as in scan.
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
    negative = m_without_v = outside = 0
    worst2 = 0.0
    m_arr, v_arr = _flat(m.array()), _flat(v.array())
    m_bad, v_bad = _NonFiniteTally(m), _NonFiniteTally(v)
    m_free, v_free = _Releaser(m, m_arr), _Releaser(v, v_arr)
    chunk = min(_ADAM_CHUNK_ELEMS, max(1, m.numel))
    den_buf = np.empty(chunk, np.float32)
    r2_buf = np.empty(chunk, np.float32)
    pairs = zip(blocks(m_arr, chunk), blocks(v_arr, chunk), strict=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for (start, mb), (_t, vb) in pairs:
            size = mb.size
            if size == 0:
                continue
            mf = _as_float32(m.dtype, mb).astype(np.float32, copy=False)
            vf = _as_float32(v.dtype, vb).astype(np.float32, copy=False)
            if bound is not None and c > 0:
                v_ok = int(vb.view(bits_type).max()) < bits_limit
                den = den_buf if size == chunk else den_buf[:size]
                r2 = r2_buf if size == chunk else r2_buf[:size]
                if mb.ndim != 1:
                    den, r2 = den.reshape(mb.shape), r2.reshape(mb.shape)
                np.add(vf, a2_c, out=den)
                np.multiply(mf, mf, out=r2)
                r2 /= den
                top = float(r2.max()) / float(c)
                if top <= fast_limit and (v_ok or float(vf.min()) >= 0):
                    worst2 = max(worst2, top)
                    if not v_ok:  # v holds +Inf or -0.0: count as count_nonfinite would
                        m_bad.add(start, mb)
                        v_bad.add(start, vb)
                    m_free.done(start, size)
                    v_free.done(start, size)
                    continue
            # Slow path: something in this chunk fails (or there is no finite bound); count each kind.
            m_bad.add(start, mb)
            v_bad.add(start, vb)
            negative += int(np.count_nonzero(vf < 0))
            m_without_v += int(np.count_nonzero((vf == 0) & (np.abs(mf) > atol)))
            if bound is not None:
                positive = vf > 0
                r2 = np.where(positive, (mf * mf) / (vf * c + a2), 0.0)
                r2[~np.isfinite(r2)] = 0.0
                outside += int(np.count_nonzero(r2 > limit))
                worst2 = max(worst2, float(r2.max()))
            m_free.done(start, size)
            v_free.done(start, size)
    m_free.flush()
    v_free.flush()
    return _PairResult(
        name, m.numel, negative, m_without_v, outside, math.sqrt(worst2), m_bad.result(), v_bad.result()
    )


# -- master weights --------------------------------------------------------------------------------


def _cast_fp32(dtype: str, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """float32 -> bfloat16 bits (round to nearest even) or float16, as torch casts."""
    if dtype == "float16":
        return arr.astype(np.float16)
    bits = arr.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(arr)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def _check_master_weights(records: list[TensorRecord], ev: list[Evidence]) -> None:
    """Pair fp32 tensors with bf16/fp16 tensors of the same shape whose names end the same way, past the
    top-level key (``master.layers.0.weight`` / ``model.layers.0.weight``)."""
    by_suffix: dict[tuple[str, tuple[int, ...]], list[TensorRecord]] = {}
    for rec in records:
        if rec.dtype in ("float32", *_LOW_PRECISION) and "." in rec.name and rec.numel > 1:
            suffix = rec.name.split(".", 1)[1]
            by_suffix.setdefault((suffix, rec.shape), []).append(rec)
    pairs = []
    for group in by_suffix.values():
        fp32 = [r for r in group if r.dtype == "float32"]
        low = [r for r in group if r.dtype in _LOW_PRECISION]
        if len(fp32) == 1 and len(low) == 1:
            pairs.append((fp32[0], low[0]))
    if not pairs:
        return
    differ = []
    for master, copy_ in pairs:
        mismatched = 0
        master_arr, copy_arr = master.array(), copy_.array()
        master_free, copy_free = _Releaser(master, master_arr), _Releaser(copy_, copy_arr)
        for (start, mb), (_t, lb) in zip(
            blocks(master_arr, _CHUNK_ELEMS), blocks(copy_arr, _CHUNK_ELEMS), strict=True
        ):
            cast = _cast_fp32(copy_.dtype, np.ascontiguousarray(mb))
            lb = np.ascontiguousarray(lb)
            same = cast.view(np.uint16) == lb.view(np.uint16)
            mismatched += int(np.count_nonzero(~same))
            master_free.done(start, mb.size)
            copy_free.done(start, lb.size)
        master_free.flush()
        copy_free.flush()
        if mismatched:
            differ.append(f"{copy_.name} != cast of {master.name} in {mismatched:,} element(s)")
    if differ:
        ev.append(
            Evidence(
                "master-weights",
                "fail",
                f"{len(differ)} of {len(pairs)} low-precision weight(s) are not the cast of their fp32 "
                f"master: {differ[0]} — they come from different steps",
                indicates="torn",
                tensors=differ[:_MAX_NAMES],
            )
        )
    else:
        ev.append(
            Evidence(
                "master-weights",
                "pass",
                f"{len(pairs)} bf16/fp16 weight(s) equal the cast of their fp32 master copies",
                values={"decisive": True},
            )
        )
