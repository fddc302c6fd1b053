"""`trainprobe mcp`: the Model Context Protocol server over stdio (:mod:`trainprobe.mcp`)."""

from __future__ import annotations

from trainprobe.cli._command import Command, CommandParser

_HELP = (
    "An AI agent (Claude Code, Claude Desktop, any MCP client) calls trainprobe's tools instead of "
    "composing shell lines: triage, scan, check, diff, logs, watch_tail, probe and run, each on a target "
    "(default: this machine) such as ssh=user@gpu01//venv=/root/venv. Every tool answers with its command's "
    "--json document "
    "as structured content and a short summary sized for a model's context; the full report is kept on disk "
    "and named in the summary.\n\n"
    "The server speaks JSON-RPC on stdin/stdout until the client closes them: start it from the client, not "
    "by hand. Needs the mcp extra: pip install 'trainprobe[mcp]'. docs/mcp.md shows how to register it."
)

_EPILOG = """\
examples:
  trainprobe mcp     started by the client, which speaks JSON-RPC on its stdin/stdout
  claude mcp add --transport stdio trainprobe -- /path/to/venv/bin/trainprobe mcp
  {"mcpServers": {"trainprobe": {"command": "/path/to/venv/bin/trainprobe", "args": ["mcp"]}}}

Read-only tools refuse targets with python=, venv=, conda= or env= unless started with --allow-interpreters.

Exit codes: 0 when the client closed the connection; 2 when the mcp extra is missing."""


def add_arguments(parser: CommandParser) -> None:
    options = parser.add_argument_group("options")
    options.add_argument(
        "--allow-interpreters",
        action="store_true",
        help="let the read-only tools (triage, scan, check, diff, logs, watch_tail, probe) take targets with "
        "interpreter settings (python=, venv=, conda=, env=). Off by default: those settings choose the "
        "program that runs, and a client that approves read-only tools without asking would let an injected "
        "prompt run one. run always takes them; names from the targets file always work",
    )


def serve(*, allow_interpreters: bool = False) -> int:
    from trainprobe.mcp import serve as serve_stdio

    serve_stdio(allow_interpreters=allow_interpreters)
    return 0


COMMAND = Command(_HELP, "[options]", add_arguments, serve, _EPILOG, reports=False)
