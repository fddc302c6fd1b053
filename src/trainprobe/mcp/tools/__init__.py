"""The MCP tools, one module each: ``trainprobe.mcp.tools.<name>`` holds the tool's function (its parameters
the input schema, its docstring the description), its document type (the output schema), its library call
(``document``), its summary (``summarise``) and its record, ``TOOL`` (:class:`~trainprobe.mcp.answer.Tool`).

A new tool is its module and its name in :data:`NAMES`; the server (:mod:`trainprobe.mcp.server`) lists and
dispatches every tool from :data:`TOOLS`.
"""

from __future__ import annotations

import importlib

from trainprobe.mcp.answer import Tool

#: every tool, in the order tools/list gives them: the module trainprobe.mcp.tools.<name> and its TOOL
NAMES = ("triage", "scan", "check", "diff", "logs", "watch_tail", "probe", "run")


def _record(name: str) -> Tool:
    record = importlib.import_module(f"{__name__}.{name}").TOOL
    if not isinstance(record, Tool) or record.name != name:
        raise TypeError(f"{__name__}.{name}.TOOL is not the Tool record of a function named {name}")
    return record


TOOLS: tuple[Tool, ...] = tuple(_record(name) for name in NAMES)


def tool(name: str) -> Tool:
    """The record of the tool named ``name``."""
    for record in TOOLS:
        if record.name == name:
            return record
    raise KeyError(name)


__all__ = ["NAMES", "TOOLS", "tool"]
