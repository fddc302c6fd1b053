"""``scan``: find NaN/Inf in checkpoints, safely, without torch, in bounded memory; one verdict per unit.

Paths become units (:mod:`trainprobe.checkpoint.units`); every part of every unit is opened (pickles read
with the safe unpickler, data memory-mapped), then every tensor is checked in a thread pool (numpy releases
the GIL in its loops), its fingerprint taken in the same pass. Non-finite values count only in weights and
optimizer state; in metadata (a callback's ``inf`` score) they are notes. The result is a
:class:`ScanReport` whose JSON form (``to_json``/``from_json``) is the documented, versioned schema
``trainprobe scan --json`` prints and the remote scan ships back."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from trainprobe.checkpoint.base import Checkpoint, Note, TensorRecord, notes_of
from trainprobe.checkpoint.fingerprint import unit_fingerprint
from trainprobe.checkpoint.formats import open_file
from trainprobe.checkpoint.frameworks import framework_named
from trainprobe.checkpoint.identity import chosen_step, collect_step_sources, tensor_roles
from trainprobe.checkpoint.numerics import NonFinite, Stats, compute_stats, count_nonfinite
from trainprobe.checkpoint.scan_report import (
    CLEAN,
    CORRUPT,
    NONFINITE,
    SCHEMA_VERSION,
    SUSPICIOUS,
    UNREADABLE,
    FileReport,
    ScanReport,
    TensorResult,
    UnitReport,
)
from trainprobe.checkpoint.units import Unit, discover_units
from trainprobe.errors import CheckpointError, CorruptCheckpointError, TrainprobeError, UsageError

__all__ = [
    "CLEAN",
    "CORRUPT",
    "NONFINITE",
    "SCHEMA_VERSION",
    "SUSPICIOUS",
    "UNREADABLE",
    "FileReport",
    "ScanReport",
    "TensorResult",
    "UnitReport",
    "open_part",
    "scan",
    "scan_units",
]

METADATA_NONFINITE = "metadata-nonfinite"


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


def reason_of(exc: TrainprobeError) -> str:
    """The message without the path (the report already names the file), with its hint."""
    text = exc.reason if isinstance(exc, CheckpointError) else exc.message
    return f"{text} — {exc.hint}" if exc.hint else text


def _check_tensor(record: TensorRecord, stats: bool, role: str) -> TensorResult:
    result = TensorResult(
        name=record.name,
        param_name=record.param_name,
        dtype=record.dtype,
        shape=list(record.shape),
        numel=record.numel,
        bytes=record.nbytes,
        role=role,
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


def open_part(path: str) -> tuple[Checkpoint | None, str | None, str, list[Note]]:
    """Open one part: (checkpoint, error, the error's verdict, notes kept from a failed read). Never
    raises for a bad file: a damaged one is ``corrupt``, one that is no checkpoint ``unreadable``."""
    try:
        return open_file(path), None, UNREADABLE, []
    except CorruptCheckpointError as exc:
        return None, reason_of(exc), CORRUPT, notes_of(exc)
    except TrainprobeError as exc:
        return None, reason_of(exc), UNREADABLE, notes_of(exc)
    except Exception as exc:  # a damaged file must not stop the scan of the others
        return None, f"cannot be read ({type(exc).__name__}: {exc})", CORRUPT, []


def metadata_notes(report: FileReport) -> None:
    """A non-finite value in metadata (a callback's score, a metric) is a note, not a finding."""
    for t in report.tensors:
        if t.nonfinite and t.role == "metadata":
            counts = ", ".join(
                f"{n} {what}" for n, what in ((t.nan, "NaN"), (t.posinf, "+Inf"), (t.neginf, "-Inf")) if n
            )
            report.notes.append(
                Note(
                    METADATA_NONFINITE, f"{t.name} holds {counts}: metadata (not weights or optimizer state)"
                )
            )


def mark_identical(units: list[UnitReport]) -> None:
    """Units whose tensors have identical fingerprints name each other (two saves of the same state)."""
    by_fp: dict[str, list[UnitReport]] = {}
    for unit in units:
        if unit.fingerprint is not None:
            by_fp.setdefault(unit.fingerprint, []).append(unit)
    for group in by_fp.values():
        if len(group) > 1:
            for unit in group:
                unit.identical_to = [u.path for u in group if u is not unit]


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
    """:func:`scan` of units already discovered."""
    started = time.perf_counter() if started is None else started
    workers = workers or min(8, (os.cpu_count() or 2) + 2)
    reports = [UnitReport(u.path, u.framework, unread=list(u.unread), problem=u.problem) for u in units]
    jobs_of: list[tuple[UnitReport, Unit, FileReport]] = []
    for report, unit in zip(reports, units, strict=True):
        report.listed = [p.path for p in unit.listed]
        for part in unit.parts:
            file = FileReport(part.path, None, role=part.role, unit=unit.path)
            report.files.append(file)
            jobs_of.append((report, unit, file))

    def open_one(item: tuple[UnitReport, Unit, FileReport]) -> Checkpoint | None:
        _report, _unit, file = item
        t0 = time.perf_counter()
        ckpt, file.error, file.error_verdict, file.notes = open_part(file.path)
        file.seconds += time.perf_counter() - t0
        if ckpt is not None:
            file.format = ckpt.format
            file.notes.extend(ckpt.notes)
        return ckpt

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainprobe-scan") as pool:
        opened = list(pool.map(open_one, jobs_of))
        total_bytes = sum(r.nbytes for c in opened if c is not None for r in c.records) or 1
        lock = threading.Lock()

        def run(record: TensorRecord, role: str) -> tuple[TensorResult, float]:
            t0 = time.perf_counter()
            result = _check_tensor(record, stats, role)
            elapsed = time.perf_counter() - t0
            if progress is not None:
                with lock:
                    progress(record.nbytes / total_bytes)
            return result, elapsed

        jobs: list[tuple[FileReport, list[Future[Any]]]] = []
        for (_report, unit, file), ckpt in zip(jobs_of, opened, strict=True):
            if ckpt is None:
                continue
            framework = _framework_of(unit, ckpt)
            roles = tensor_roles(ckpt, file.role, framework)  # type: ignore[arg-type]
            jobs.append(
                (file, [pool.submit(run, rec, role) for rec, role in zip(ckpt.records, roles, strict=True)])
            )
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
    by_unit: dict[int, list[tuple[str, str, Checkpoint]]] = {}
    for (report, _unit, file), ckpt in zip(jobs_of, opened, strict=True):
        if ckpt is not None:
            by_unit.setdefault(id(report), []).append((file.path, file.role, ckpt))
    for report, unit in zip(reports, units, strict=True):
        parts = by_unit.get(id(report), [])
        report.framework = unit.framework  # a single file's, once its object said (a Lightning .ckpt)
        framework = framework_named(report.framework)
        report.step_sources = collect_step_sources(unit.path, framework, parts)  # type: ignore[arg-type]
        report.step, report.step_source = chosen_step(report.step_sources)
        for file in report.files:
            metadata_notes(file)
            file.settle_verdict()
        report.settle_verdict()
        report.fingerprint = unit_fingerprint(
            (f"{os.path.relpath(f.path, unit.path) if f.path != unit.path else ''}:{t.name}", t.fingerprint)
            for f in report.files
            for t in f.tensors
            if t.role != "metadata"
        )
    mark_identical(reports)
    for ckpt in opened:
        if ckpt is not None:
            ckpt.close()
    return ScanReport(reports, time.perf_counter() - started, stats=stats, verify=verify)


def _framework_of(unit: Unit, ckpt: Checkpoint) -> Any:
    """The framework of a unit; a single file's by what its object is (a Lightning .ckpt)."""
    if unit.framework != "file":
        return framework_named(unit.framework)
    from trainprobe.checkpoint.frameworks import FRAMEWORKS

    for fw in FRAMEWORKS:
        if fw.knows(ckpt.objects):
            unit.framework = fw.name
            return fw
    return framework_named("file")
