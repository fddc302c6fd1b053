"""Each tool's document type: the top-level keys of the JSON document it answers with, which the SDK turns
into the tool's ``outputSchema`` (``-> Annotated[CallToolResult, ScanDocument]``).

Every key is optional (``total=False``) and the schemas allow more keys: a document is its command's
``--json``, whose schema grows, and a client must not reject a report for a key added later. A value the
library may leave out is nullable; :func:`trainprobe.mcp.safe.sendable` makes a NaN or an infinity null, so
every float is nullable. The key lists follow the library's ``to_json`` methods (tests/mcp checks each tool's
answer against its schema). The class docstrings are the schemas' descriptions, in the clients' markdown.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12


class _Versioned(TypedDict, total=False):
    """The keys every library document has (docs/json.md): its schema, its one-word answer, its exit code
    and a summary of counts."""

    schema_version: int
    verdict: str
    exit_code: int
    summary: dict[str, Any]


class TriageDocument(_Versioned, total=False):
    """`trainprobe triage --json`: the diagnosis of one run (its verdict, the four answers, conclusions)."""

    run_dir: str
    target: str | None
    host: str | None
    problems: list[Any]
    answers: dict[str, Any]
    resume_from: dict[str, Any] | None
    conclusions: list[Any]
    units: list[Any]
    saves: list[Any]
    disagreements: list[Any]
    duplicates: list[Any]
    timeline: list[Any]
    log_files: list[Any]
    logs_skipped: list[Any]
    near_steps: float | None
    seconds: float | None
    logs: dict[str, Any] | None


class ScanDocument(_Versioned, total=False):
    """`trainprobe scan --json`: a verdict per unit and per file, each non-finite tensor counted."""

    options: dict[str, Any]
    totals: dict[str, Any]
    units: list[Any]
    files: list[Any]


class CheckDocument(_Versioned, total=False):
    """`trainprobe check --json`: a verdict per checkpoint with the evidence that decided it."""

    units: list[Any]


class DiffDocument(_Versioned, total=False):
    """`trainprobe diff --json`: what changed between checkpoints a and b, tensor by tensor."""

    a: str
    b: str
    notes: list[Any]
    units: dict[str, Any]
    not_compared: dict[str, Any]
    optimizer_steps: dict[str, Any]
    same_run: dict[str, Any]
    modules: list[Any]
    top_modules: list[Any]
    tensors: list[Any]


class LogsDocument(_Versioned, total=False):
    """`trainprobe logs --json`: the runs read and their findings, most severe first."""

    runs: list[Any]
    findings: list[Any]
    not_read: list[Any]


class WatchTailDocument(LogsDocument, total=False):
    """The summary document `trainprobe watch --json` ends with, and `tail`: the bytes read."""

    tail: dict[str, Any]


class FleetDocument(TypedDict, total=False):
    """A fleet's document (`--json` with a fleet target): one outcome per target."""

    exit_code: int | None
    duration: float | None
    parallel: int
    log_dir: str | None
    counts: dict[str, Any]
    targets: list[Any]


class ProbeDocument(FleetDocument, total=False):
    """`trainprobe probe --json`: what one machine has; for a fleet, the fleet's document."""

    target: str | None
    host: str | None
    user: str | None
    agent_python: str | None
    interpreters: list[Any]
    gpus: list[Any] | None
    disks: list[Any]
    load: list[Any]
    cpus: int | None
    memory: dict[str, Any]
    processes: list[Any]


class RunDocument(FleetDocument, total=False):
    """`trainprobe run --json`: how the script ended and where its output is; for a fleet, the fleet's
    document."""

    target: str | None
    result: Any
    python: str | None
    host: str | None
    error: dict[str, Any] | None
    stdout_log: str | None
    stderr_log: str | None
