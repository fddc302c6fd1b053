"""One piece of evidence about a checkpoint unit: what ``check`` lists per check, and what ``scan`` and
``diff`` report about a unit as a whole (its step sources, a missing rank partition). One type, so every
command states a finding the same way and decides its verdict by the same rule
(:mod:`trainprobe.checkpoint.verdict`). Stdlib only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Outcome = Literal["pass", "fail", "skip", "note"]


@dataclass
class Evidence:
    """One check and what it found. ``indicates`` is the verdict a failure means (torn, corrupt, nonfinite,
    suspicious, unreadable); ``file`` the part of the unit it concerns ("" for the unit as a whole). A
    ``note`` informs and decides nothing (a name that disagrees with the step the unit holds)."""

    check: str
    outcome: Outcome
    message: str
    indicates: str | None = None
    tensors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    file: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "outcome": self.outcome,
            "indicates": self.indicates,
            "message": self.message,
            "file": self.file,
            "tensors": self.tensors,
            "values": self.values,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Evidence:
        return cls(
            check=d["check"],
            outcome=d["outcome"],
            message=d["message"],
            indicates=d.get("indicates"),
            tensors=list(d.get("tensors", [])),
            values=dict(d.get("values", {})),
            file=d.get("file", ""),
        )
