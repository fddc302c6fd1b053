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
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.base import Checkpoint, Note, TensorRecord, notes_of
from trainprobe.checkpoint.fingerprint import unit_fingerprint
from trainprobe.checkpoint.formats import open_file
from trainprobe.checkpoint.frameworks import framework_named
from trainprobe.checkpoint.identity import StepSource, chosen_step, collect_step_sources, tensor_roles
from trainprobe.checkpoint.numerics import NonFinite, Stats, compute_stats, count_nonfinite
from trainprobe.checkpoint.units import Unit, discover_units
from trainprobe.checkpoint.unpickler import SUSPICIOUS as SUSPICIOUS_NOTE
from trainprobe.errors import CheckpointError, CorruptCheckpointError, TrainprobeError, UsageError

SCHEMA_VERSION = 2

# The verdicts a scan gives (trainprobe.checkpoint.verdict has the whole vocabulary).
CLEAN, NONFINITE, SUSPICIOUS, CORRUPT, UNREADABLE = (
    V.CLEAN,
    V.NONFINITE,
    V.SUSPICIOUS,
    V.CORRUPT,
    V.UNREADABLE,
)
METADATA_NONFINITE = "metadata-nonfinite"


@dataclass
class TensorResult:
    name: str
    param_name: str | None
    dtype: str
    shape: list[int]
    numel: int
    bytes: int
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    first_bad_index: list[int] | None = None
    stats: dict[str, float | None] | None = None
    error: str | None = None
    role: str = "weights"  # weights | optimizer | metadata
    fingerprint: str | None = None

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf

    @property
    def is_finding(self) -> bool:
        """Non-finite values that count: in weights or optimizer state, not in metadata."""
        return bool(self.nonfinite) and self.role != "metadata"

    @property
    def display_name(self) -> str:
        return f"{self.name} ({self.param_name})" if self.param_name else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "param_name": self.param_name,
            "role": self.role,
            "dtype": self.dtype,
            "shape": self.shape,
            "numel": self.numel,
            "bytes": self.bytes,
            "nan": self.nan,
            "posinf": self.posinf,
            "neginf": self.neginf,
            "first_bad_index": self.first_bad_index,
            "fingerprint": self.fingerprint,
            "stats": self.stats,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorResult:
        return cls(
            name=d["name"],
            param_name=d.get("param_name"),
            dtype=d["dtype"],
            shape=list(d["shape"]),
            numel=d["numel"],
            bytes=d["bytes"],
            nan=d["nan"],
            posinf=d["posinf"],
            neginf=d["neginf"],
            first_bad_index=d.get("first_bad_index"),
            stats=d.get("stats"),
            error=d.get("error"),
            role=d.get("role", "weights"),
            fingerprint=d.get("fingerprint"),
        )


@dataclass
class FileReport:
    """One part of a unit as scan read it. ``error`` is why it could not be read; ``error_verdict`` says
    whether that makes it corrupt (damaged: truncated, a record missing) or unreadable."""

    path: str
    format: str | None
    verdict: str = CLEAN
    error: str | None = None
    seconds: float = 0.0
    tensors: list[TensorResult] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    role: str = "state"
    unit: str = ""
    error_verdict: str = UNREADABLE

    @property
    def tensor_count(self) -> int:
        return len(self.tensors)

    @property
    def parameters(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)

    @property
    def nonfinite(self) -> int:
        """Non-finite values that count (weights and optimizer state)."""
        return sum(t.nonfinite for t in self.tensors if t.is_finding)

    @property
    def bad_tensors(self) -> list[TensorResult]:
        return [t for t in self.tensors if t.is_finding]

    def settle_verdict(self) -> None:
        """The worst of what was found: a suspicious global, non-finite values, damage, not read at all."""
        found: list[str] = []
        if any(n.kind == SUSPICIOUS_NOTE for n in self.notes):
            found.append(SUSPICIOUS)
        if self.nonfinite:
            found.append(NONFINITE)
        if self.problems or any(t.error for t in self.tensors):
            found.append(CORRUPT)
        if self.error is not None:
            found.append(self.error_verdict)
        self.verdict = V.worst(found)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "unit": self.unit,
            "role": self.role,
            "format": self.format,
            "verdict": self.verdict,
            "error": self.error,
            "totals": {
                "tensors": self.tensor_count,
                "parameters": self.parameters,
                "bytes": self.bytes,
                "nonfinite": self.nonfinite,
                "seconds": round(self.seconds, 6),
            },
            "notes": [{"kind": n.kind, "message": n.message} for n in self.notes],
            "problems": list(self.problems),
            "tensors": [t.to_json() for t in self.tensors],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FileReport:
        return cls(
            path=d["path"],
            format=d.get("format"),
            verdict=d["verdict"],
            error=d.get("error"),
            seconds=d["totals"]["seconds"],
            tensors=[TensorResult.from_json(t) for t in d["tensors"]],
            notes=[Note(n["kind"], n["message"]) for n in d.get("notes", [])],
            problems=list(d.get("problems", [])),
            role=d.get("role", "state"),
            unit=d.get("unit", d["path"]),
        )


@dataclass
class UnitReport:
    """One unit: its verdict (the worst of its files'), its files, and what identifies it."""

    path: str
    framework: str
    files: list[FileReport] = field(default_factory=list)
    verdict: str = CLEAN
    unread: list[str] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)
    problem: str | None = None
    step: int | None = None
    step_source: str = "nothing"
    step_sources: list[StepSource] = field(default_factory=list)
    fingerprint: str | None = None
    identical_to: list[str] = field(default_factory=list)

    @property
    def nonfinite(self) -> int:
        return sum(f.nonfinite for f in self.files)

    def settle_verdict(self) -> None:
        found = [f.verdict for f in self.files]
        if self.unread or self.problem is not None:
            found.append(UNREADABLE)
        self.verdict = V.worst(found)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "framework": self.framework,
            "verdict": self.verdict,
            "problem": self.problem,
            "files": [f.path for f in self.files],
            "unread": list(self.unread),
            "listed": list(self.listed),
            "step": self.step,
            "step_source": self.step_source,
            "step_sources": [s.to_json() for s in self.step_sources],
            "fingerprint": self.fingerprint,
            "identical_to": list(self.identical_to),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], files: dict[str, FileReport]) -> UnitReport:
        return cls(
            path=d["path"],
            framework=d["framework"],
            files=[files[p] for p in d["files"] if p in files],
            verdict=d["verdict"],
            unread=list(d.get("unread", [])),
            listed=list(d.get("listed", [])),
            problem=d.get("problem"),
            step=d.get("step"),
            step_source=d.get("step_source", "nothing"),
            step_sources=[StepSource(**s) for s in d.get("step_sources", [])],
            fingerprint=d.get("fingerprint"),
            identical_to=list(d.get("identical_to", [])),
        )


@dataclass
class ScanReport:
    """What ``scan`` found, per unit. ``exit_code`` follows :func:`trainprobe.checkpoint.verdict.exit_code`:
    1 for any finding (non-finite, suspicious, corrupt — a CRC mismatch included), else 2 if a unit could
    not be read, else 0."""

    units: list[UnitReport]
    seconds: float
    stats: bool = False
    verify: bool = False

    @property
    def files(self) -> list[FileReport]:
        """Every file of every unit, in order."""
        return [f for u in self.units for f in u.files]

    @property
    def exit_code(self) -> int:
        return V.exit_code(u.verdict for u in self.units)

    @property
    def verdict(self) -> str:
        return V.worst(u.verdict for u in self.units)

    def totals(self) -> dict[str, Any]:
        files = self.files
        counted = [t for f in files for t in f.tensors if t.is_finding]
        return {
            "units": len(self.units),
            "units_unreadable": sum(u.verdict == UNREADABLE for u in self.units),
            "files": len(files),
            "files_unreadable": sum(f.verdict == UNREADABLE for f in files),
            "tensors": sum(f.tensor_count for f in files),
            "parameters": sum(f.parameters for f in files),
            "bytes": sum(f.bytes for f in files),
            "nonfinite": sum(f.nonfinite for f in files),
            "nan": sum(t.nan for t in counted),
            "posinf": sum(t.posinf for t in counted),
            "neginf": sum(t.neginf for t in counted),
            "bad_tensors": len(counted),
            "seconds": round(self.seconds, 6),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "options": {"stats": self.stats, "verify": self.verify},
            "totals": self.totals(),
            "units": [u.to_json() for u in self.units],
            "files": [f.to_json() for f in self.files],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScanReport:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise UsageError(
                f"scan report has schema_version {version!r}; this trainprobe reads {SCHEMA_VERSION}"
            )
        files = {f["path"]: FileReport.from_json(f) for f in data["files"]}
        return cls(
            units=[UnitReport.from_json(u, files) for u in data["units"]],
            seconds=data["totals"]["seconds"],
            stats=bool(data["options"]["stats"]),
            verify=bool(data["options"]["verify"]),
        )


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
