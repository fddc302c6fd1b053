"""``scan``: find NaN/Inf in checkpoints, safely, without torch, in bounded memory; one verdict per unit.

Paths become units (:mod:`trainprobe.checkpoint.units.discover`); every part of every unit is opened (pickles
read with the safe unpickler, data memory-mapped), then every tensor is checked by a pool of threads, a large
one in pieces (numpy releases the GIL in its loops; the report is the same whatever the threads), its
fingerprint taken in the same pass (a large one read from its file's map under a read lease where one can
be had: :mod:`.mapped`). Non-finite values count only in
weights and optimizer state; in metadata (a callback's ``inf`` score) they are notes. The result is a
:class:`ScanReport` whose JSON form (``to_json``/``from_json``) is the documented, versioned schema
``trainprobe scan --json`` prints and the remote scan ships back."""

from __future__ import annotations

import collections
import functools
import mmap
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint.fingerprint import mark_identical
from trainprobe.checkpoint.numerics import NonFinite, Piece, Stats, plan_stats
from trainprobe.checkpoint.reading.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.reading.lease import Lease, take_lease
from trainprobe.checkpoint.scanning.judge import PartRead, judge_unit
from trainprobe.checkpoint.scanning.mapped import MAPPED_MIN, plan_mapped
from trainprobe.checkpoint.scanning.report import (
    FileReport,
    ScanReport,
    TensorResult,
)
from trainprobe.checkpoint.threads import Plan, Pool, default_workers, in_order
from trainprobe.checkpoint.units.discover import Unit, discover_units
from trainprobe.checkpoint.units.facts import PartFacts
from trainprobe.checkpoint.units.frameworks import Part, TensorRole
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


def scan(
    paths: Sequence[str],
    *,
    stats: bool = False,
    verify: bool = False,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> ScanReport:
    """Scan checkpoint files, directories (searched recursively for units) and globs for NaN/+Inf/−Inf.

    ``stats`` adds per-tensor statistics; ``verify`` checks zip CRC32s and storage sizes. ``workers``:
    threads reading tensors (default: the usable cores, see :func:`read_parts`; 1: none). ``progress`` is
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


_KNOWN = (CheckpointError, ValueError, TypeError, OverflowError, MemoryError)


class _Failed:
    """A job of a tensor's check that could not be done: the sentence its tensor reports."""

    def __init__(self, exc: Exception) -> None:
        if isinstance(exc, CheckpointError):
            self.reason = reason_of(exc)
        else:  # shapes a damaged pickle made up
            self.reason = f"cannot be checked ({type(exc).__name__}: {exc})"


def _guarded(job: Callable[[], Any]) -> Callable[[], tuple[Any, float]]:
    """``job`` as one of a tensor's: what it gives (:class:`_Failed` when it could not) and its seconds."""

    def run() -> tuple[Any, float]:
        t0 = time.perf_counter()
        try:
            value = job()
        except _KNOWN as exc:
            value = _Failed(exc)
        return value, time.perf_counter() - t0

    return run


class _TensorCheck:
    """One tensor's check as jobs for any thread (its NaN/Inf pieces, then its statistics' pieces) and the
    :class:`TensorResult` they make, finished in the jobs' order by the thread that collects them."""

    def __init__(
        self, record: TensorRecord, stats: bool, role: str, part: str, threaded: bool, lease: Lease | None
    ) -> None:
        self.result = TensorResult(
            name=record.name,
            param_name=record.param_name,
            dtype=record.dtype,
            shape=list(record.shape),
            numel=record.numel,
            bytes=record.nbytes,
            role=role,
            file=record.file if record.file and record.file != part else None,
        )
        self.count: Plan[Piece, NonFinite] | None = None
        self.stats: Plan[Any, Stats | None] | None = None
        self.failed: _Failed | None = None  # a plan that could not be made
        try:
            self.count = plan_mapped(record, lease, threaded=threaded)
            if stats:
                self.stats = plan_stats(record)
        except _KNOWN as exc:
            self.failed = _Failed(exc)
        plans = [plan for plan in (self.count, self.stats) if plan is not None]
        # At least one job: a tensor is finished in its place, after the tensors before it.
        self.jobs = [_guarded(job) for plan in plans for job in plan.jobs] or [_guarded(lambda: None)]

    def finish(self, done: list[Any]) -> TensorResult:
        result = self.result
        if self.count is None:
            result.error = self.failed.reason if self.failed is not None else None
            return result
        counted, summed = done[: len(self.count.jobs)], done[len(self.count.jobs) :]
        failed = next((d for d in counted if isinstance(d, _Failed)), None)
        if failed is not None:
            result.error = failed.reason
            return result
        found = self.count.finish(counted)
        result.nan, result.posinf, result.neginf = found.nan, found.posinf, found.neginf
        result.first_bad_index = list(found.first_bad_index) if found.first_bad_index is not None else None
        result.fingerprint = found.fingerprint
        failed = next((d for d in summed if isinstance(d, _Failed)), None) or self.failed
        if failed is not None:
            result.error = failed.reason
        elif self.stats is not None:
            result.stats = _stats_dict(self.stats.finish(summed))
        return result


def _nothing() -> None:
    return None


def _lease_for(record: TensorRecord, leases: dict[Any, Lease | None], taken: list[Lease]) -> Lease | None:
    """The read lease of a large tensor's map (taken the first time one is asked for; None where none can
    be had), added to ``taken`` when it is taken here."""
    buffer = record.storage.buffer
    if record.nbytes < MAPPED_MIN or not isinstance(buffer, mmap.mmap):
        return None
    if buffer in leases:
        return leases[buffer]
    lease = leases[buffer] = take_lease(buffer)
    if lease is not None:
        taken.append(lease)
    return lease


_SMALL = 64 << 20  # bytes of checkpoint below which one thread does it all: a pool costs more than it saves


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
    """Read each requested part where it is: open it, check every tensor, take its facts. One
    :class:`PartRead` per request, in order; never raises for a bad file.

    The tensors' pieces (:func:`~trainprobe.checkpoint.numerics.plan_nonfinite`) of all parts are jobs for
    ``workers`` threads (default: :func:`~trainprobe.checkpoint.threads.default_workers`; one thread for a
    scan under 64 MB, and for ``workers=1``: the sequential path, no pool), a window of them in flight,
    their results collected in order: the report is the same whatever the threads."""
    small = workers is None and sum(_bytes_of(r.part.path) for r in requests) < _SMALL
    workers = 1 if small else workers or default_workers()
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

    pool = Pool(workers, "trainprobe-scan") if workers > 1 else None
    leases: dict[Any, Lease | None] = {}  # per map: the read lease its large tensors are read under
    try:
        opens = [functools.partial(open_one, i) for i in range(len(requests))]
        checkpoints = list(in_order(opens, pool, workers, window=len(opens)))
        facts = _check_all(requests, files, checkpoints, (pool, workers, leases), stats, verify, progress)
    finally:
        if pool is not None:
            pool.shutdown()
        for lease in leases.values():
            if lease is not None:
                lease.let_go()
    reads = [PartRead(file, fact) for file, fact in zip(files, facts, strict=True)]
    for ckpt in checkpoints:
        if ckpt is not None:
            ckpt.close()
    return reads


def _check_all(
    requests: Sequence[PartRequest],
    files: list[FileReport],
    checkpoints: list[Checkpoint | None],
    threads: tuple[Any, int, dict[Any, Lease | None]],
    stats: bool,
    verify: bool,
    progress: Callable[[float], None] | None,
) -> list[PartFacts | None]:
    """Every tensor of every opened part checked (and each part verified), into its file's report; the facts
    of each part (None where it did not open). ``threads``: the pool (None: this thread), its workers, and
    the read leases of the maps (taken here, let go when a part's last job is collected)."""
    pool, workers, leases = threads
    total_bytes = sum(r.nbytes for c in checkpoints if c is not None for r in c.records) or 1
    facts: list[PartFacts | None] = []
    opened: list[tuple[FileReport, Checkpoint, list[TensorRole]]] = []
    for request, file, ckpt in zip(requests, files, checkpoints, strict=True):
        if ckpt is None:
            facts.append(None)
            continue
        framework = framework_of(request.framework, ckpt)
        role = part_role(file.role)
        facts.append(PartFacts.of(file.path, role, ckpt, framework))
        opened.append((file, ckpt, list(tensor_roles(ckpt, role, framework))))
    # What is asked, in order: a tensor's check, a part's verify (None) or its end (the leases it took) with
    # its jobs. A tensor's plan is made when the window of jobs in flight reaches it.
    asked: collections.deque[tuple[FileReport, _TensorCheck | list[Lease] | None, int]] = collections.deque()

    def jobs() -> Iterator[Callable[[], Any]]:
        for file, ckpt, roles in opened:
            taken: list[Lease] = []
            for record, tensor_role in zip(ckpt.records, roles, strict=True):
                lease = _lease_for(record, leases, taken)
                check = _TensorCheck(record, stats, tensor_role, file.path, pool is not None, lease)
                asked.append((file, check, len(check.jobs)))
                yield from check.jobs
            if verify:
                asked.append((file, None, 1))
                yield ckpt.verify
            if taken:  # collected after every job of the part: no thread reads its maps any more
                asked.append((file, taken, 1))
                yield _nothing

    done: list[Any] = []
    for value in in_order(jobs(), pool, workers):
        done.append(value)
        file, check, count = asked[0]
        if len(done) < count:
            continue
        asked.popleft()
        if check is None:
            file.problems.extend(done[0])
        elif isinstance(check, list):
            for lease in check:
                lease.let_go()
        else:
            file.tensors.append(check.finish([v for v, _seconds in done]))
            file.seconds += sum(seconds for _v, seconds in done)
            if progress is not None:
                progress(check.result.bytes / total_bytes)
        done = []
    return facts
