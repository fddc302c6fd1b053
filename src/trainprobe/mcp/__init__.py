"""``trainprobe mcp``: a Model Context Protocol server over stdio, so an AI agent calls tools instead of
composing shell lines.

Tools: ``triage``, ``scan``, ``check``, ``diff``, ``logs``, ``watch_tail``, ``probe``, ``run``; each takes a
``target`` (default local) and answers with its command's ``--json`` document as structured content and a
short summary as text (docs/mcp.md).

- :func:`main` serves on stdin/stdout until the client closes them (``python -m trainprobe.mcp``).
- :func:`build_server` returns the server (``trainprobe.mcp.server``, which needs the ``mcp`` extra).
- :mod:`trainprobe.mcp.tasks` is where the tools reach the library; it is shipped to far sides, so this
  package's ``__init__`` imports only the standard library.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from trainprobe.errors import UsageError, missing_extra

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

INSTALL_HINT = "pip install 'trainprobe[mcp]'"


def build_server() -> MCPServer:
    """The MCP server with every tool registered; UsageError naming the extra when the SDK is missing."""
    try:
        from trainprobe.mcp.server import build_server as build
    except ImportError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        raise missing_extra("the MCP Python SDK", extra="mcp", needed_by="trainprobe mcp") from None
    return build()


def main() -> None:
    """Serve over stdio until the client closes the streams. A missing SDK is one line on stderr, exit 2."""
    try:
        server = build_server()
    except UsageError as exc:
        if os.environ.get("TRAINPROBE_DEBUG"):
            raise
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(exc.exit_code) from None
    server.run("stdio")


__all__ = ["INSTALL_HINT", "build_server", "main"]
