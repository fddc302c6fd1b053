"""The ``run`` tool: a Python script on a target (``trainprobe.remote.run``, or for a fleet
``trainprobe.remote.fanout.run_fleet``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import FleetDocument
from trainprobe.mcp.parameters import Target, Timeout
from trainprobe.mcp.summary import Summary, fleet
from trainprobe.mcp.targets import LOCAL, engine_target, place_of, presented, targets_of

RUN_OUTPUT_CHARS = 3000  # of the script's stdout shown by `run`; stderr gets half


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


def run(
    script: Annotated[str, Field(description="The Python script's source text (not a path).")],
    args: Annotated[
        tuple[str, ...],
        Field(description="Its arguments: sys.argv[1:], passed exactly, never through a shell."),
    ] = (),
    target: Target = LOCAL,
    need: Annotated[
        tuple[str, ...],
        Field(
            description="Modules the interpreter must have (e.g. ['torch']): discovery picks one that has "
            "them."
        ),
    ] = (),
    timeout_s: Timeout = 600,
) -> Annotated[CallToolResult, RunDocument]:
    """Run a Python script on the target: no quoting, nothing left running, the full output kept here.

    The script runs as __main__ with sys.argv = ['<script>', *args] and stdin /dev/null; if it defines
    main(), its JSON-serialisable return value comes back as `result`. The summary shows the end of stdout
    and stderr and says how much was left out and where the whole output is. An uncaught exception, a
    timeout or an unreachable target is an error result with the one-line reason (and the document)."""
    return answer(
        TOOL,
        lambda: document(target, script, list(args), need=list(need), timeout=timeout_s),
        target=target,
    )


def document(target: str, script: str, args: list[str], *, need: list[str], timeout: float) -> dict[str, Any]:
    """``run --json``'s document (a fleet's for a fleet). A run that failed (the script raised, timed out, the
    target is unreachable) is a document whose ``error`` says so, as the CLI prints it; see
    :func:`run_failure`."""
    from trainprobe.remote import run as run_one
    from trainprobe.remote.fanout import needs_fleet, run_fleet

    # remote.run takes a one-line str naming an existing file for a path: a newline keeps it source text.
    source = script if script.endswith("\n") else script + "\n"
    targets = targets_of(target)
    if needs_fleet(targets):
        return run_fleet(targets, source, args, timeout=timeout, need=need).to_json()
    where = place_of(targets[0])
    with presented(where):
        result = run_one(where.engine, source, args, timeout=timeout, need=need)
    document = result.to_json()
    document["stdout_log"] = str(result.stdout_path)
    document["stderr_log"] = str(result.stderr_path)
    return document


def run_failure(document: dict[str, Any]) -> str | None:
    """The sentence for a single run that failed (None when it ran to its end), without the target for the
    local default, as the CLI without ``--on`` words its errors."""
    error = document.get("error")
    if not isinstance(error, dict):
        return None
    message = str(error.get("message"))
    local = engine_target(LOCAL) + ": "
    return message[len(local) :] if message.startswith(local) else message


def summarise(doc: dict[str, Any]) -> Summary:
    if "targets" in doc:
        return fleet(doc, "run")
    s = Summary()
    s.add(
        f"run on {doc.get('target')}: exit code {doc.get('exit_code')} in {doc.get('duration')} s, python "
        f"{doc.get('python')} on {doc.get('host')}"
    )
    if doc.get("result") is not None:
        shown = json.dumps(doc["result"], default=str)
        cut = f" … ({len(shown) - 1000:,} more characters in the full report)" if len(shown) > 1000 else ""
        s.add(f"main() returned: {shown[:1000]}{cut}")
    for stream, limit in (("stdout", RUN_OUTPUT_CHARS), ("stderr", RUN_OUTPUT_CHARS // 2)):
        s.lines.extend(_output_tail(stream, doc.get(f"{stream}_log"), limit))
    return s


def _output_tail(stream: str, path: str | None, limit: int) -> list[str]:
    """The end of a run's stdout or stderr, saying how many bytes before it were left out and where."""
    if not path:
        return []
    try:
        data = Path(path).read_bytes()
    except OSError:
        return [f"{stream}: not kept ({path} cannot be read)"]
    if not data:
        return [f"{stream}: (empty)"]
    shown = data[-limit:]
    if len(shown) < len(data):
        cut = shown.find(b"\n")
        shown = shown[cut + 1 :] if 0 <= cut < len(shown) - 1 else shown
    head = f"{stream} ({len(data):,} bytes"
    head += (
        f"; the first {len(data) - len(shown):,} left out, all of it in {path})"
        if len(shown) < len(data)
        else ")"
    )
    return [head + ":", shown.decode("utf-8", "replace").rstrip("\n")]


TOOL = Tool(run, summarise, brief="a Python script there", read_only=False, fleet=True, failure=run_failure)
