"""``scan``: find NaN/Inf in checkpoints, safely, without torch, in bounded memory.

Files are opened (pickles read with the safe unpickler, data memory-mapped), then every floating tensor is
checked in a thread pool (numpy releases the GIL in its loops). The result is a :class:`ScanReport` whose JSON
form (``to_json``/``from_json``) is the documented, versioned schema ``trainprobe scan --json`` prints and the
remote scan ships back."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint.base import Checkpoint, Note, TensorRecord
from trainprobe.checkpoint.discover import discover
from trainprobe.checkpoint.formats import open_file
from trainprobe.checkpoint.numerics import NonFinite, Stats, compute_stats, count_nonfinite
from trainprobe.errors import CheckpointError, TrainprobeError, UsageError

SCHEMA_VERSION = 1

# File verdicts, worst last within each exit class.
CLEAN, NONFINITE, SUSPICIOUS, CORRUPT, UNREADABLE = (
    "clean",
    "nonfinite",
    "suspicious",
    "corrupt",
    "unreadable",
)


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

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf

    @property
    def display_name(self) -> str:
        return f"{self.name} ({self.param_name})" if self.param_name else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "param_name": self.param_name,
            "dtype": self.dtype,
            "shape": self.shape,
            "numel": self.numel,
            "bytes": self.bytes,
            "nan": self.nan,
            "posinf": self.posinf,
            "neginf": self.neginf,
            "first_bad_index": self.first_bad_index,
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
        )


@dataclass
class FileReport:
    path: str
    format: str | None
    verdict: str = CLEAN
    error: str | None = None
    seconds: float = 0.0
    tensors: list[TensorResult] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

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
        return sum(t.nonfinite for t in self.tensors)

    @property
    def bad_tensors(self) -> list[TensorResult]:
        return [t for t in self.tensors if t.nonfinite]

    def settle_verdict(self) -> None:
        if self.error is not None:
            self.verdict = UNREADABLE
        elif self.nonfinite:
            self.verdict = NONFINITE
        elif any(n.kind == "suspicious-global" for n in self.notes):
            self.verdict = SUSPICIOUS
        elif self.problems or any(t.error for t in self.tensors):
            self.verdict = CORRUPT
        else:
            self.verdict = CLEAN

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
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
        )


@dataclass
class ScanReport:
    """What ``scan`` found. ``exit_code``: 1 if any file has non-finite values or a suspicious global (a
    finding wins), else 2 if any file is unreadable or corrupt, else 0."""

    files: list[FileReport]
    seconds: float
    stats: bool = False
    verify: bool = False

    @property
    def exit_code(self) -> int:
        verdicts = {f.verdict for f in self.files}
        if verdicts & {NONFINITE, SUSPICIOUS}:
            return 1
        if verdicts & {CORRUPT, UNREADABLE}:
            return 2
        return 0

    @property
    def verdict(self) -> str:
        for v in (NONFINITE, SUSPICIOUS, UNREADABLE, CORRUPT):
            if any(f.verdict == v for f in self.files):
                return v
        return CLEAN

    def totals(self) -> dict[str, Any]:
        return {
            "files": len(self.files),
            "files_unreadable": sum(f.verdict == UNREADABLE for f in self.files),
            "tensors": sum(f.tensor_count for f in self.files),
            "parameters": sum(f.parameters for f in self.files),
            "bytes": sum(f.bytes for f in self.files),
            "nonfinite": sum(f.nonfinite for f in self.files),
            "nan": sum(t.nan for f in self.files for t in f.tensors),
            "posinf": sum(t.posinf for f in self.files for t in f.tensors),
            "neginf": sum(t.neginf for f in self.files for t in f.tensors),
            "bad_tensors": sum(len(f.bad_tensors) for f in self.files),
            "seconds": round(self.seconds, 6),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "options": {"stats": self.stats, "verify": self.verify},
            "totals": self.totals(),
            "files": [f.to_json() for f in self.files],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScanReport:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise UsageError(
                f"scan report has schema_version {version!r}; this trainprobe reads {SCHEMA_VERSION}"
            )
        return cls(
            files=[FileReport.from_json(f) for f in data["files"]],
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


def _reason(exc: TrainprobeError) -> str:
    """The message without the path (the report already names the file), with its hint."""
    text = exc.reason if isinstance(exc, CheckpointError) else exc.message
    return f"{text} — {exc.hint}" if exc.hint else text


def _check_tensor(record: TensorRecord, stats: bool) -> TensorResult:
    result = TensorResult(
        name=record.name,
        param_name=record.param_name,
        dtype=record.dtype,
        shape=list(record.shape),
        numel=record.numel,
        bytes=record.nbytes,
    )
    try:
        found: NonFinite = count_nonfinite(record)
        result.nan, result.posinf, result.neginf = found.nan, found.posinf, found.neginf
        result.first_bad_index = list(found.first_bad_index) if found.first_bad_index is not None else None
        if stats:
            result.stats = _stats_dict(compute_stats(record))
    except CheckpointError as exc:
        result.error = _reason(exc)
    except (
        ValueError,
        TypeError,
        OverflowError,
        MemoryError,
    ) as exc:  # shapes/strides a damaged pickle made up
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
    """Scan checkpoint files, directories (searched recursively) and globs for NaN/+Inf/−Inf.

    ``stats`` adds per-tensor statistics; ``verify`` checks zip CRC32s and storage sizes. ``progress`` is
    called with fractions of the total work (they add up to 1.0). Unreadable files are reported in the result,
    never raised; only a call that names nothing to scan raises UsageError."""
    if not paths:
        raise UsageError("nothing to scan: give at least one file, directory or glob")
    started = time.perf_counter()
    targets = discover(list(paths))
    reports = [FileReport(t.path, None, error=t.problem) for t in targets]
    workers = workers or min(8, (os.cpu_count() or 2) + 2)

    def open_one(report: FileReport) -> Checkpoint | None:
        if report.error is not None:
            return None
        t0 = time.perf_counter()
        try:
            ckpt = open_file(report.path)
        except TrainprobeError as exc:
            report.error = _reason(exc)
            return None
        except Exception as exc:  # a damaged file must not stop the scan of the others
            report.error = f"cannot be read ({type(exc).__name__}: {exc})"
            return None
        finally:
            report.seconds += time.perf_counter() - t0
        report.format = ckpt.format
        report.notes.extend(ckpt.notes)
        return ckpt

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainprobe-scan") as pool:
        opened = list(pool.map(open_one, reports))
        total_bytes = sum(r.nbytes for c in opened if c is not None for r in c.records) or 1
        lock = threading.Lock()

        def run(report: FileReport, record: TensorRecord) -> tuple[TensorResult, float]:
            t0 = time.perf_counter()
            result = _check_tensor(record, stats)
            elapsed = time.perf_counter() - t0
            if progress is not None:
                with lock:
                    progress(record.nbytes / total_bytes)
            return result, elapsed

        jobs: list[tuple[FileReport, list[Future[Any]]]] = []
        for report, ckpt in zip(reports, opened, strict=True):
            if ckpt is None:
                continue
            jobs.append((report, [pool.submit(run, report, rec) for rec in ckpt.records]))
            if verify:
                jobs.append((report, [pool.submit(ckpt.verify)]))
        for report, futures in jobs:
            for fut in futures:
                value = fut.result()
                if isinstance(value, list):
                    report.problems.extend(value)
                else:
                    result, elapsed = value
                    report.tensors.append(result)
                    report.seconds += elapsed
    for ckpt in opened:
        if ckpt is not None:
            ckpt.close()
    for report in reports:
        report.settle_verdict()
    return ScanReport(reports, time.perf_counter() - started, stats=stats, verify=verify)
