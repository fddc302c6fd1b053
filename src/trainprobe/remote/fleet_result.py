"""How a fleet ended: one :class:`Outcome` per target and the :class:`FleetResult` holding them.

Exit code of a fleet (:attr:`FleetResult.exit_code`): 0 when every target ran its script to the end with exit
0; 1 when any target failed (script exit code not 0, exception, timeout, unreachable, no interpreter,
interrupted). Per-target exit codes are in the outcomes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainprobe import errors
from trainprobe.errors import RemoteError
from trainprobe.remote.session import RunResult

DEFAULT_PARALLEL = 32

#: status words, in the order a summary lists them
STATUSES = ("ok", "failed", "exception", "timeout", "unreachable", "auth", "no-python", "killed", "error")
_STATUS_OF_ERROR: tuple[tuple[type[RemoteError], str], ...] = (
    (errors.RemoteTimeoutError, "timeout"),
    (errors.UnreachableError, "unreachable"),
    (errors.AuthenticationError, "auth"),
    (errors.InterpreterNotFoundError, "no-python"),
    (errors.RemoteExceptionError, "exception"),
    (errors.RemoteKilledError, "killed"),
)


@dataclass
class Outcome:
    """How one target of a fleet ended."""

    target: str
    status: str
    exit_code: int
    duration: float = 0.0
    result: Any = None
    summary: str = ""
    error: RemoteError | None = None
    log_dir: Path | None = None
    python: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "status": self.status,
            "exit_code": self.exit_code,
            "duration": round(self.duration, 3),
            "result": self.result,
            "summary": self.summary,
            "python": self.python,
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "error": None
            if self.error is None
            else {"type": type(self.error).__name__, "message": str(self.error)},
        }


@dataclass
class FleetResult:
    """Every target's outcome, in the order given, and the fleet's exit code."""

    outcomes: list[Outcome]
    duration: float = 0.0
    parallel: int = DEFAULT_PARALLEL
    log_dir: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.outcomes and all(o.ok for o in self.outcomes) else 1

    def counts(self) -> dict[str, int]:
        """How many targets ended in each status (only statuses that occurred, in :data:`STATUSES` order)."""
        found = [o.status for o in self.outcomes]
        return {status: found.count(status) for status in STATUSES if status in found}

    def rows(self) -> list[dict[str, Any]]:
        """One row per target for a table: target, status, exit code, duration (s), summary."""
        return [
            {
                "target": o.target,
                "status": o.status,
                "exit": o.exit_code,
                "duration": round(o.duration, 2),
                "summary": o.summary,
            }
            for o in self.outcomes
        ]

    def summary_line(self) -> str:
        """E.g. ``50 targets: 48 ok, 1 timeout, 1 unreachable in 6.1 s``."""
        parts = ", ".join(f"{n} {status}" for status, n in self.counts().items())
        return f"{len(self.outcomes)} targets: {parts} in {self.duration:.1f} s"

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "duration": round(self.duration, 3),
            "parallel": self.parallel,
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "counts": {"total": len(self.outcomes), **self.counts()},
            "targets": [o.to_json() for o in self.outcomes],
        }


def status_of(error: RemoteError | None, exit_code: int = 0) -> str:
    """The status word of a finished run: ok, failed (the script's exit code), or its error's kind."""
    if error is None:
        return "ok" if exit_code == 0 else "failed"
    return next((s for cls, s in _STATUS_OF_ERROR if isinstance(error, cls)), "error")


def outcome_of(result: RunResult) -> Outcome:
    """The fleet's view of one finished run (its error is the session's, already explained by the hop)."""
    return Outcome(
        target=result.target,
        status=status_of(result.error, result.exit_code),
        exit_code=result.exit_code,
        duration=result.duration,
        result=result.result,
        summary=_summary(result),
        error=result.error,
        log_dir=result.log_dir,
        python=result.python,
    )


def _summary(result: RunResult) -> str:
    if result.error is not None:
        return result.error.reason + (f" — {result.error.hint}" if result.error.hint else "")
    if result.exit_code != 0:
        last = _last_line(result.stderr_path)
        return f"exit {result.exit_code}" + (f": {last}" if last else "")
    if result.result is None:
        return ""
    text = json.dumps(result.result, default=str, separators=(",", ":"))
    return text if len(text) <= 80 else text[:77] + "..."


def _last_line(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""
