"""What ``check`` reports: one piece of :class:`Evidence` per check, a :class:`CheckResult` per unit (its
verdict decided by :func:`decide` from the evidence), and the :class:`CheckReport` (``check --json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence, Outcome
from trainprobe.checkpoint.numerics import NonFinite
from trainprobe.checkpoint.reading.base import Note, TensorRecord

SCHEMA_VERSION = 3  # the shared contract of docs/json.md
__all__ = [
    "SCHEMA_VERSION",
    "CheckReport",
    "CheckResult",
    "Outcome",
    "decide",
    "nonfinite_entries",
]


@dataclass
class CheckResult:
    """The verdict on one unit, with the evidence that decided it and the files it consists of."""

    path: str
    verdict: str
    reason: str
    format: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    tensors: int = 0
    bytes: int = 0
    step: int | None = None
    nonfinite: list[dict[str, Any]] = field(default_factory=list)
    framework: str = "file"
    files: list[dict[str, Any]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    step_source: str = "nothing"
    step_sources: list[dict[str, Any]] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    fingerprint: str | None = None  # the unit's, as scan computes it
    identical_to: list[str] = field(default_factory=list)
    # (part path, tensor name, fingerprint) of the weights and optimizer state, while the unit is checked
    tensor_fingerprints: list[tuple[str, str, str | None]] = field(default_factory=list, repr=False)
    # tensor key (``optimizer.pt:state.0.exp_avg``) -> fingerprint, kept for the evidence between units
    # (check.cross); not part of the JSON document
    tensor_prints: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def is_finding(self) -> bool:
        return V.is_finding(self.verdict)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "framework": self.framework,
            "format": self.format,
            "verdict": self.verdict,
            "reason": self.reason,
            "step": self.step,
            "step_source": self.step_source,
            "step_sources": self.step_sources,
            "tensors": self.tensors,
            "bytes": self.bytes,
            "files": self.files,
            "unread": self.unread,
            "notes": [{"kind": n.kind, "message": n.message} for n in self.notes],
            "nonfinite": self.nonfinite,
            "fingerprint": self.fingerprint,
            "identical_to": list(self.identical_to),
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass
class CheckReport:
    results: list[CheckResult]

    def exit_code_for(self, *, strict: bool = False) -> int:
        """:func:`trainprobe.checkpoint.verdict.exit_code` over the units (``strict``: unknown is 1)."""
        return V.exit_code((r.verdict for r in self.results), strict=strict)

    @property
    def exit_code(self) -> int:
        return self.exit_code_for()

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": V.worst((r.verdict for r in self.results), default=V.UNKNOWN),
            "exit_code": self.exit_code,
            "summary": V.counts(r.verdict for r in self.results),
            "units": [r.to_json() for r in self.results],
        }


def decide(result: CheckResult) -> CheckResult:
    """The unit's verdict: the worst failed evidence (a FAIL line never sits under a green headline), else
    unknown when evidence is ambiguous or absent, else consistent."""
    fails = [e for e in result.evidence if e.outcome == "fail"]
    for e in fails:
        if e.indicates not in V.ORDER:
            e.indicates = V.CORRUPT
    strong = [e for e in result.evidence if e.outcome == "pass" and e.values.get("decisive")]
    ambiguous = [e for e in result.evidence if e.values.get("ambiguous")]
    if fails:
        result.verdict = V.worst(e.indicates or V.CORRUPT for e in fails)
        first = [e for e in fails if e.indicates == result.verdict]
        result.reason = first[0].message
        others = [e for e in fails if e.indicates != result.verdict]
        if others:
            # A live save also breaks CRC32s (a storage changed between checksum and write): torn evidence
            # names the cause, the rest follows.
            result.reason += f" (and {others[0].message})"
    elif ambiguous:
        result.verdict, result.reason = V.UNKNOWN, ambiguous[0].message
    elif strong:
        result.verdict = V.CONSISTENT
        result.reason = "; ".join(e.message for e in strong[:2])
    else:
        result.verdict = V.UNKNOWN
        skipped = [e for e in result.evidence if e.outcome == "skip" and e.check.startswith("optimizer")]
        result.reason = (
            skipped[0].message
            if skipped
            else "no optimizer state or manifest: weights alone cannot show a torn snapshot"
        )
    return result


def nonfinite_entries(
    records: list[TensorRecord], counts: list[NonFinite], roles: list[str] | None = None
) -> list[dict[str, Any]]:
    """One entry per tensor holding NaN/Inf (with its role when known)."""
    out = []
    for i, (rec, bad) in enumerate(zip(records, counts, strict=True)):
        if bad.total:
            out.append(
                {
                    "name": rec.name,
                    "param_name": rec.param_name,
                    "role": roles[i] if roles else "weights",
                    "nan": bad.nan,
                    "posinf": bad.posinf,
                    "neginf": bad.neginf,
                    "first_bad_index": list(bad.first_bad_index) if bad.first_bad_index else None,
                }
            )
    return out
