"""What an MCP tool is (:class:`Tool`, one record in each tool's module, listed in
:data:`trainprobe.mcp.tools.TOOLS`) and how every tool answers (:func:`answer`): its document as structured
content, kept in full on disk, and its summary as text; any failure an error result with one sentence.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult, TextContent

from trainprobe.errors import TrainprobeError
from trainprobe.mcp.safe import sendable, shown
from trainprobe.mcp.summary import Summary
from trainprobe.mcp.targets import interpreter_settings
from trainprobe.visible import visible

Document = dict[str, Any]


def _never_failed(_document: Document) -> str | None:
    return None


@dataclass(frozen=True)
class Tool:
    """One MCP tool: ``TOOL`` in its module, ``trainprobe.mcp.tools.<name>``.

    - ``function``: the tool as the SDK registers it; its name is the tool's, its typed parameters are the
      input schema, its docstring the description, and its return type ``Annotated[CallToolResult,
      XDocument]`` names the document type (a TypedDict in its module) that becomes the output schema.
    - ``summary``: the document's short text (a :class:`~trainprobe.mcp.summary.Summary`).
    - ``brief``: a few words on what it is for, in the server's instructions.
    - ``read_only``: runs no program the client names (``readOnlyHint``; see :func:`refused_target`).
    - ``fleet``: takes a fleet target (its description says how).
    - ``document_help``: how the description names the document, when it is not ``trainprobe NAME --json``'s.
    - ``failure``: the sentence for a document that says the work failed (a run's error), else None.
    """

    function: Callable[..., CallToolResult]
    summary: Callable[[Document], Summary]
    brief: str
    read_only: bool = True
    fleet: bool = False
    document_help: str | None = None
    failure: Callable[[Document], str | None] = _never_failed

    @property
    def name(self) -> str:
        return self.function.__name__

    @property
    def document(self) -> type:
        """The document type the function's return annotation names."""
        returns = typing.get_type_hints(self.function, include_extras=True)["return"]
        document: type = returns.__metadata__[0]
        return document


class Policy:
    """How this server was started: ``allow_interpreters`` lets the read-only tools take a target with
    interpreter settings (``trainprobe mcp --allow-interpreters``)."""

    allow_interpreters = False


def refused_target(tool: Tool, target: str) -> str | None:
    """Why a read-only tool refuses ``target`` (None when it does not): a read-only tool runs no program the
    client names, and ``python=``, ``venv=``, ``conda=`` and ``env=`` (``env=LD_PRELOAD=…``) name one. A
    client that approves read-only tools without asking must not be able to run one through ``scan``."""
    if Policy.allow_interpreters or not tool.read_only:
        return None
    named = interpreter_settings(target)
    if not named:
        return None
    return (
        f"{tool.name} is read-only and does not take interpreter settings ({', '.join(named)}) in its "
        "target: they choose the program it runs — use a target without them (discovery picks the "
        "interpreter), a name from the targets file, or start the server with `trainprobe mcp "
        "--allow-interpreters`"
    )


def error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=visible(message))], is_error=True)


def answer(tool: Tool, work: Callable[[], Document], *, target: str | None = None) -> CallToolResult:
    """Run one tool's work: its document as structured content, kept in full on disk, and its summary as
    text. A TrainprobeError, or a document that ``tool.failure`` finds failed, is an error result whose text
    starts with the sentence the CLI prints; a target a read-only tool refuses (:func:`refused_target`) and
    any other exception are error results too: the server answers every call.

    Every document passes through :func:`trainprobe.mcp.safe.sendable` (lone surrogates escaped, NaN/Inf as
    null) before it is kept or sent, and the summary is built from its :func:`~trainprobe.mcp.safe.shown`
    copy (every data string inert: control characters, bidi controls and newlines escaped visibly)."""
    try:
        refused = None if target is None else refused_target(tool, target)
        if refused:
            return error_result(refused)
        return _answer(tool, work)
    except TrainprobeError as exc:
        return error_result(str(exc))
    except Exception as exc:
        return error_result(
            f"{tool.name} failed: {type(exc).__name__}: {exc} (a bug in trainprobe: please report it)"
        )


def _answer(tool: Tool, work: Callable[[], Document]) -> CallToolResult:
    document = sendable(work())
    report, size, problem = save_report(tool.name, document)
    try:
        text = tool.summary(shown(document)).text(report, size)
    except Exception as exc:
        # The document is the answer: a summary that trips on a field the library renamed must not lose it.
        note = f"(no summary: {type(exc).__name__}: {exc}; the structured content is complete)"
        text = note + "\n" + Summary().text(report, size)
    if problem:
        text += f"\n({problem})"
    failed = tool.failure(document)
    if failed:
        text = f"{failed}\n{text}"
    result = CallToolResult(
        content=[TextContent(type="text", text=visible(text, keep="\n"))],
        structured_content=document,
        is_error=bool(failed),
    )
    result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")  # it can be sent
    return result


def save_report(tool: str, document: Document) -> tuple[Path | None, int, str | None]:
    """(path, size, problem): the document written to ``report.json`` in a new directory under the runs
    directory (``$TRAINPROBE_RUNS_DIR``, else ``$XDG_STATE_HOME/trainprobe/runs``)."""
    from trainprobe.remote.logs import new_run_dir

    text = json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False, default=str) + "\n"
    try:
        path = new_run_dir(f"mcp-{tool}".replace("_", "-")) / "report.json"
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return None, 0, f"the full report could not be written: {exc.strerror or exc}"
    return path, len(text.encode()), None
