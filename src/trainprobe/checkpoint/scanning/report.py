"""What ``scan`` reports: a :class:`ScanReport` of :class:`UnitReport` s (one per unit), each with the
:class:`FileReport` of its files and their :class:`TensorResult` s; the JSON form (``to_json`` /
``from_json``) is the documented, versioned schema ``scan --json`` prints and ``scan --on`` ships back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.base import Note
from trainprobe.checkpoint.reading.pickle.unpickler import SUSPICIOUS as SUSPICIOUS_NOTE
from trainprobe.checkpoint.safe_io import CHANGED_WHILE_READ
from trainprobe.checkpoint.units.steps import StepSource
from trainprobe.errors import UsageError

SCHEMA_VERSION = 3  # the shared contract of docs/json.md


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
    file: str | None = None  # the data file holding it, when not its part (a DCP rank file, an HF shard)

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
            "file": self.file,
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
            file=d.get("file"),
        )


@dataclass
class FileReport:
    """One part of a unit as scan read it. ``error`` is why it could not be read; ``error_verdict`` says
    whether that makes it corrupt (damaged: truncated, a record missing) or unreadable."""

    path: str
    format: str | None
    verdict: str = V.CLEAN
    error: str | None = None
    seconds: float = 0.0
    tensors: list[TensorResult] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    role: str = "state"
    unit: str = ""
    error_verdict: str = V.UNREADABLE

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
            found.append(V.SUSPICIOUS)
        if self.nonfinite:
            found.append(V.NONFINITE)
        if self.problems or any(t.error and not t.error.startswith(CHANGED_WHILE_READ) for t in self.tensors):
            found.append(V.CORRUPT)
        if any(t.error and t.error.startswith(CHANGED_WHILE_READ) for t in self.tensors):
            found.append(V.UNREADABLE)  # re-saved while read: read it again, it is not damaged
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
    verdict: str = V.CLEAN
    unread: list[str] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)
    problem: str | None = None
    step: int | None = None
    step_source: str = "nothing"
    step_sources: list[StepSource] = field(default_factory=list)
    fingerprint: str | None = None
    identical_to: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)  # the unit as a whole: steps, missing parts

    @property
    def nonfinite(self) -> int:
        return sum(f.nonfinite for f in self.files)

    def settle_verdict(self) -> None:
        """The worst of its files' verdicts, of its failed evidence, and unreadable for files not read."""
        found = [f.verdict for f in self.files]
        found += [e.indicates or V.CORRUPT for e in self.evidence if e.outcome == "fail"]
        if self.unread or self.problem is not None:
            found.append(V.UNREADABLE)
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
            "evidence": [e.to_json() for e in self.evidence],
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
            evidence=[Evidence.from_json(e) for e in d.get("evidence", [])],
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
            "units_unreadable": sum(u.verdict == V.UNREADABLE for u in self.units),
            "files": len(files),
            "files_unreadable": sum(f.verdict == V.UNREADABLE for f in files),
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
            "summary": V.counts(u.verdict for u in self.units),
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
