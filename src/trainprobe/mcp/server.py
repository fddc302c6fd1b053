"""The MCP server: every tool of :data:`trainprobe.mcp.tools.TOOLS` registered, with its description.

Each tool (its module under :mod:`trainprobe.mcp.tools`) is a thin layer over the library like the CLI: its
typed parameters are its input schema, its docstring (with :data:`TARGET_HELP`) its description and its
document type its output schema. It answers through :func:`trainprobe.mcp.answer.answer`: the JSON
document, kept in ``report.json`` in a new directory under the runs directory, as structured content and a
short summary as text. A TrainprobeError is a result with ``isError`` and the CLI's one sentence.
"""

from __future__ import annotations

import inspect

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from trainprobe import __version__
from trainprobe.mcp.answer import Policy, Tool
from trainprobe.mcp.tools import TOOLS
from trainprobe.remote.hops import kinds_help  # the registry alone: no hop module, not the engine


def _target_help() -> str:
    """The target syntax for a model: one clause per hop kind, from the hop registry."""
    kinds = "; ".join(f"`{usage}`: {meaning}" for usage, meaning in kinds_help())
    return (
        "`target` says where the files are and where the work runs (default `local`: this machine). It is "
        f"one string of //-separated hops, outermost first, the interpreter and settings last — {kinds}. ssh "
        "hops in a row go through a jump host (`ssh=bastion//ssh=gpu07`). Examples: "
        "`ssh=root@10.1.2.6//venv=/root/venv`, `ssh=gpu07//docker=trainer`, `pct=200`. A name from the "
        "targets file ($TRAINPROBE_CONFIG or ~/.config/trainprobe/targets.toml) works too. The far side "
        "needs only Python (and numpy for checkpoints and logs); nothing is installed there, no shell "
        "quoting is involved, and paths and globs are the far side's (relative to its login directory or "
        "cd=). `~`, `~/x`, `$HOME/x` and `${HOME}/x` are the home of the user the work runs as there (after "
        "`sudo=USER`: that user's), in every path argument and in `python=`, `venv=`, `conda=` and `cd=`: "
        "`ssh=gpu07//venv=~/venv` with the path `~/runs/exp3` works as written. The read-only tools (all "
        "but `run`) refuse `python=`, `venv=`, `conda=` and `env=` unless the server was started with "
        "--allow-interpreters: leave them out and discovery picks the interpreter."
    )


TARGET_HELP = _target_help()

FLEET_HELP = """\
A fleet runs on many targets at once: a host range (`ssh=node[01-16]`), a group of the targets file, or \
`ssh=login1//slurm=JOBID` (every node of a job); the answer is one outcome per target."""

RESULT_HELP = """\
The answer: structured content is {document}; the text is a \
short summary (verdict, counts, the worst findings first) ending with the path of the full report on this \
machine. `timeout_s` is a hard limit: the work is killed there when it runs over."""

_PARTS = [f"`{each.name}` ({each.brief})" for each in TOOLS if each.name != "triage"]
_PARTS_TEXT = f"{', '.join(_PARTS[:-1])} and {_PARTS[-1]}"

INSTRUCTIONS = f"""\
trainprobe debugs ML training runs where they are: one tool call instead of composing ssh, quoting and \
python -c lines. Start with `triage` on a run directory (logs and checkpoints): it answers what is broken \
where, what the log shows, what caused what, and which checkpoint to resume from. {_PARTS_TEXT} are \
its parts.

{TARGET_HELP}"""


def description(record: Tool) -> str:
    parts = [inspect.cleandoc(record.function.__doc__ or ""), TARGET_HELP]
    if record.fleet:
        parts.append(FLEET_HELP)
    document = record.document_help or f"the JSON document `trainprobe {record.name} --json` prints"
    parts.append(RESULT_HELP.format(document=document))
    return "\n\n".join(parts)


def build_server(*, allow_interpreters: bool = False) -> MCPServer:
    """The server with every tool; ``allow_interpreters`` lets read-only tools take interpreter settings."""
    Policy.allow_interpreters = allow_interpreters
    server: MCPServer = MCPServer(
        "trainprobe", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    for each in TOOLS:
        server.add_tool(
            each.function,
            description=description(each),
            annotations=ToolAnnotations(
                read_only_hint=each.read_only, destructive_hint=False, open_world_hint=True
            ),
        )
    return server
