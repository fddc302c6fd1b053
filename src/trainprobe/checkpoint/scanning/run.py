"""``scan``: find NaN/Inf in checkpoints, safely, without torch, in bounded memory; one verdict per unit.

Paths become units (:mod:`trainprobe.checkpoint.units.discover`); every part of every unit is opened (pickles
read with the safe unpickler, data memory-mapped), then every tensor is checked in a thread pool (numpy
releases the GIL in its loops), its fingerprint taken in the same pass. Non-finite values count only in
weights and optimizer state; in metadata (a callback's ``inf`` score) they are notes. The result is a
:class:`ScanReport` whose JSON form (``to_json``/``from_json``) is the documented, versioned schema
``trainprobe scan --json`` prints and the remote scan ships back."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint.fingerprint import mark_identical
from trainprobe.checkpoint.numerics import NonFinite, Stats, compute_stats, count_nonfinite
from trainprobe.checkpoint.reading.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.scanning.judge import PartRead, judge_unit
from trainprobe.checkpoint.scanning.report import (
    FileReport,
    ScanReport,
    TensorResult,
)
from trainprobe.checkpoint.units.discover import Unit, discover_units
from trainprobe.checkpoint.units.facts import PartFacts
from trainprobe.checkpoint.units.frameworks import Part
from trainprobe.checkpoint.units.open import framework_of, open_part, part_role, reason_of
from trainprobe.checkpoint.units.roles import tensor_roles
from trainprobe.errors import CheckpointError, UsageError

__all__ = ["PartRequest", "read_parts", "scan", "scan_units"]


def _stats_dict(stats: Stats | None) -> dict[str, float | None] | None:
    if stats is None:
        return None
    return {
        "min": stats.min,
        "max": stats.max,
        "mean": stats.mean,
        "std": stats.std,
        "absmax": stats.absmax,
        "l2": stats.l2,
        "zero_fraction": stats.zero_fraction,
    }


def _check_tensor(record: TensorRecord, stats: bool, role: str, part: str = "") -> TensorResult:
    result = TensorResult(
        name=record.name,
        param_name=record.param_name,
        dtype=record.dtype,
        shape=list(record.shape),
        numel=record.numel,
        bytes=record.nbytes,
        role=role,
        file=record.file if record.file and record.file != part else None,
    )
    try:
        found: NonFinite = count_nonfinite(record, fingerprint=True)
        result.nan, result.posinf, result.neginf = found.nan, found.posinf, found.neginf
        result.first_bad_index = list(found.first_bad_index) if found.first_bad_index is not None else None
        result.fingerprint = found.fingerprint
        if stats:
            result.stats = _stats_dict(compute_stats(record))
    except CheckpointError as exc:
        result.error = reason_of(exc)
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:  # shapes a damaged pickle made up
        result.error = f"cannot be checked ({type(exc).__name__}: {exc})"
    return result


def scan(
    paths: Sequence[str],
    *,
    stats: bool = False,
    verify: bool = False,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> ScanReport:
    """Scan checkpoint files, directories (searched recursively for units) and globs for NaN/+Inf/−Inf.

    ``stats`` adds per-tensor statistics; ``verify`` checks zip CRC32s and storage sizes. ``progress`` is
    called with fractions of the total work (they add up to 1.0). Unreadable files are reported in the result,
    never raised; only a call that names nothing to scan raises UsageError."""
    if not paths:
        raise UsageError("nothing to scan: give at least one file, directory or glob")
    started = time.perf_counter()
    units = discover_units(list(paths))
    return scan_units(units, stats=stats, verify=verify, workers=workers, progress=progress, started=started)


def scan_units(
    units: list[Unit],
    *,
    stats: bool = False,
    verify: bool = False,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
    started: float | None = None,
) -> ScanReport:
    """:func:`scan` of units already discovered: each part read (:func:`read_parts`), each unit judged from
    its parts' reads (:func:`trainprobe.checkpoint.scanning.judge.judge_unit`)."""
    started = time.perf_counter() if started is None else started
    requests = [PartRequest(part, unit.path, unit.framework) for unit in units for part in unit.parts]
    reads = iter(read_parts(requests, stats=stats, verify=verify, workers=workers, progress=progress))
    reports = [judge_unit(unit, [next(reads) for _ in unit.parts]) for unit in units]
    mark_identical(reports)
    return ScanReport(reports, time.perf_counter() - started, stats=stats, verify=verify)


@dataclass(frozen=True)
class PartRequest:
    """A part to read: the part, its unit's path and framework, and (for a share of a multi-file part) the
    data files to read here and the ``.metadata`` or index bytes when they are not here."""

    part: Part
    unit: str
    framework: str
    files: tuple[str, ...] | None = None
    description: bytes | None = None


class _Inline:
    """Runs each job at once, in this thread: for a small scan a thread pool costs more than it saves (its
    import alone, concurrent.futures with logging, is a few ms of an agent's every call)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], *args: Any) -> _Done:
        return _Done(fn(*args))


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


_SMALL = 64 << 20  # bytes of checkpoint below which one thread does it all


def _bytes_of(path: str) -> int:
    if os.path.isdir(path):
        try:
            with os.scandir(path) as entries:
                return sum(e.stat().st_size for e in entries if e.is_file(follow_symlinks=False))
        except OSError:
            return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def read_parts(
    requests: Sequence[PartRequest],
    *,
    stats: bool = False,
    verify: bool = False,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> list[PartRead]:
    """Read each requested part where it is: open it, check every tensor (a thread pool for large work),
    take its facts. One :class:`PartRead` per request, in order; never raises for a bad file."""
    small = workers is None and sum(_bytes_of(r.part.path) for r in requests) < _SMALL
    workers = workers or min(8, (os.cpu_count() or 2) + 2)
    files = [FileReport(r.part.path, None, role=r.part.role, unit=r.unit) for r in requests]

    def open_one(i: int) -> Checkpoint | None:
        request, file = requests[i], files[i]
        t0 = time.perf_counter()
        ckpt, file.error, file.error_verdict, file.notes = open_part(
            request.part.path, files=request.files, description=request.description
        )
        file.seconds += time.perf_counter() - t0
        if ckpt is not None:
            file.format = ckpt.format
            file.notes.extend(ckpt.notes)
        return ckpt

    pool: Any
    if small:
        pool = _Inline()
    else:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainprobe-scan")
    reads: list[PartRead] = []
    with pool:
        opened = [pool.submit(open_one, i) for i in range(len(requests))]
        checkpoints = [f.result() for f in opened]
        total_bytes = sum(r.nbytes for c in checkpoints if c is not None for r in c.records) or 1
        lock = threading.Lock()

        def run(record: TensorRecord, role: str, part: str) -> tuple[TensorResult, float]:
            t0 = time.perf_counter()
            result = _check_tensor(record, stats, role, part)
            elapsed = time.perf_counter() - t0
            if progress is not None:
                with lock:
                    progress(record.nbytes / total_bytes)
            return result, elapsed

        jobs: list[tuple[FileReport, list[Any]]] = []
        facts: list[PartFacts | None] = []
        for request, file, ckpt in zip(requests, files, checkpoints, strict=True):
            if ckpt is None:
                facts.append(None)
                continue
            framework = framework_of(request.framework, ckpt)
            role = part_role(file.role)
            facts.append(PartFacts.of(file.path, role, ckpt, framework))
            roles = tensor_roles(ckpt, role, framework)
            futures = [pool.submit(run, r, tr, file.path) for r, tr in zip(ckpt.records, roles, strict=True)]
            jobs.append((file, futures))
            if verify:
                jobs.append((file, [pool.submit(ckpt.verify)]))
        for file, futures in jobs:
            for fut in futures:
                value = fut.result()
                if isinstance(value, list):
                    file.problems.extend(value)
                else:
                    result, elapsed = value
                    file.tensors.append(result)
                    file.seconds += elapsed
    for file, fact, ckpt in zip(files, facts, checkpoints, strict=True):
        reads.append(PartRead(file, fact))
        if ckpt is not None:
            ckpt.close()
    return reads
