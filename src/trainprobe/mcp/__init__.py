"""``trainprobe mcp``: a Model Context Protocol server over stdio, so an AI agent calls tools instead of
composing shell lines.

Tools: ``triage``, ``scan``, ``check``, ``diff``, ``logs``, ``watch_tail``, ``probe``, ``run``; each takes a
``target`` (default local) and answers with its command's ``--json`` document as structured content and a
short summary as text (docs/mcp.md).

- :func:`main` serves on stdin/stdout until the client closes them (``python -m trainprobe.mcp``).
- :func:`build_server` returns the server (``trainprobe.mcp.server``, which needs the ``mcp`` extra).
- :mod:`trainprobe.mcp.tools`: one module per tool (its function, document type, library call and summary),
  listed in ``TOOLS``. This package's ``__init__`` imports only the standard library, so a missing SDK is one
  sentence (:func:`build_server`).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from trainprobe.errors import UsageError, missing_extra

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

INSTALL_HINT = "pip install 'trainprobe[mcp]'"


def build_server(*, allow_interpreters: bool = False) -> MCPServer:
    """The MCP server with every tool registered; UsageError naming the extra when the SDK is missing.
    ``allow_interpreters``: read-only tools take targets with interpreter settings (``python=`` …)."""
    try:
        from trainprobe.mcp.server import build_server as build
    except ImportError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        raise missing_extra("the MCP Python SDK", extra="mcp", needed_by="trainprobe mcp") from None
    return build(allow_interpreters=allow_interpreters)


def serve(*, allow_interpreters: bool = False) -> None:
    """Serve over stdio until the client closes the streams (:mod:`trainprobe.mcp.stdio`: malformed requests
    answered, a message that cannot be sent replaced by an error)."""
    server = build_server(allow_interpreters=allow_interpreters)  # first: it names a missing SDK
    import anyio

    from trainprobe.mcp.stdio import serve as serve_stdio

    anyio.run(serve_stdio, server)


def main(argv: list[str] | None = None) -> None:
    """``python -m trainprobe.mcp [--allow-interpreters]``: serve over stdio until the client closes the
    streams. A missing SDK is one line on stderr, exit 2."""
    args = sys.argv[1:] if argv is None else argv
    unknown = [a for a in args if a != "--allow-interpreters"]
    if unknown:
        sys.stderr.write(f"error: unknown argument {unknown[0]!r} (only --allow-interpreters)\n")
        raise SystemExit(2)
    try:
        serve(allow_interpreters="--allow-interpreters" in args)
    except UsageError as exc:
        if os.environ.get("TRAINPROBE_DEBUG"):
            raise
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(exc.exit_code) from None


__all__ = ["INSTALL_HINT", "build_server", "main", "serve"]
