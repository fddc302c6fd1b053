"""The MCP server: one small function per tool, a thin layer over the library like the CLI, and one
:class:`~trainprobe.mcp.answer.Tool` record per tool in :data:`TOOLS`.

Each tool's typed parameters are its input schema, its docstring (with :data:`TARGET_HELP`) its description
and its document type (:mod:`trainprobe.mcp.documents`) its output schema. A tool calls one function of
:mod:`trainprobe.mcp.tools` and answers through :func:`trainprobe.mcp.answer.answer`: the JSON document,
kept in ``report.json`` in a new directory under the runs directory, as structured content and a short
summary (:mod:`trainprobe.mcp.summary`) as text. A TrainprobeError is a result with ``isError`` and the
CLI's one sentence.

A new tool is its function here and its record in :data:`TOOLS`, its document type in
:mod:`~trainprobe.mcp.documents`, its summary in :mod:`~trainprobe.mcp.summary` and, when it reaches the
library, its call in :mod:`~trainprobe.mcp.tools`.
"""

from __future__ import annotations

import inspect
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from trainprobe import __version__
from trainprobe.mcp import summary, summary_remote, tools
from trainprobe.mcp.answer import Policy, Tool, answer
from trainprobe.mcp.documents import (
    CheckDocument,
    DiffDocument,
    LogsDocument,
    ProbeDocument,
    RunDocument,
    ScanDocument,
    TriageDocument,
    WatchTailDocument,
)

TARGET_HELP = """\
`target` says where the files are and where the work runs (default `local`: this machine). It is one string \
of //-separated hops, outermost first: `ssh=user@host[:port]` (OpenSSH, ~/.ssh/config applies), \
`ssh=bastion//ssh=gpu07` (a jump host), `sudo` or `sudo=USER`, `pct=200` (a Proxmox container), \
`docker=NAME`, `podman=NAME`, `kubectl=POD,namespace=NS`, `lxc=NAME`, `incus=NAME`, `slurm=JOBID@NODE`; then \
the interpreter and settings: `venv=/root/venv`, `python=/usr/bin/python3`, `conda=ENV`, `cd=DIR`, \
`env=NAME=VALUE`. Examples: `ssh=root@10.1.2.6//venv=/root/venv`, `ssh=gpu07//docker=trainer`, `pct=200`. \
A name from the targets file ($TRAINPROBE_CONFIG or ~/.config/trainprobe/targets.toml) works too. The far \
side needs only Python (and numpy for checkpoints and logs); nothing is installed there, no shell quoting is \
involved, and paths and globs are the far side's (relative to its login directory or cd=). The read-only \
tools (all but `run`) refuse `python=`, `venv=`, `conda=` and `env=` unless the server was started with \
--allow-interpreters: leave them out and discovery picks the interpreter."""

FLEET_HELP = """\
A fleet runs on many targets at once: a host range (`ssh=node[01-16]`), a group of the targets file, or \
`ssh=login1//slurm=JOBID` (every node of a job); the answer is one outcome per target."""

RESULT_HELP = """\
The answer: structured content is {document}; the text is a \
short summary (verdict, counts, the worst findings first) ending with the path of the full report on this \
machine. `timeout_s` is a hard limit: the work is killed there when it runs over."""

INSTRUCTIONS = f"""\
trainprobe debugs ML training runs where they are: one tool call instead of composing ssh, quoting and \
python -c lines. Start with `triage` on a run directory (logs and checkpoints): it answers what is broken \
where, what the log shows, what caused what, and which checkpoint to resume from. `scan` (NaN/Inf), `check` \
(torn or corrupt checkpoints), `diff` (two checkpoints), `logs` (training logs), `watch_tail` (the latest \
findings of a growing log), `probe` (what a machine has) and `run` (a Python script there) are its parts.

{TARGET_HELP}"""

# Parameter types: each one's description lands in the input schema.
Target = Annotated[
    str,
    Field(
        description="Where the files are: `local` (default), or e.g. `ssh=user@host//venv=/root/venv`, "
        "`pct=200`, `docker=NAME`."
    ),
]
Paths = Annotated[
    list[str],
    Field(
        min_length=1,
        description="Files, directories (searched recursively) or globs, expanded on the target.",
    ),
]
Events = Annotated[
    tuple[str, ...],
    Field(description="Regular expressions: matching log lines are events (e.g. `preempted`)."),
]
Threshold = Annotated[float, Field(gt=0, description="Spike threshold (a modified z-score).")]


Timeout = Annotated[
    float,
    Field(gt=0, le=6 * 3600, description="Hard limit in seconds; the work is killed when it runs over."),
]


def triage(
    run_dir: Annotated[
        str, Field(description="The run's directory (its logs and checkpoints), on the target.")
    ],
    target: Target = tools.LOCAL,
    threshold: Threshold = 6.0,
    stall_floor_s: Annotated[
        float, Field(ge=0, description="Shortest gap in logging that counts as a stall.")
    ] = 10.0,
    events: Events = (),
    timeout_s: Timeout = 1800,
) -> Annotated[CallToolResult, TriageDocument]:
    """The whole diagnosis of one training run in one call: what went wrong, when, why, and which checkpoint
    to resume from.

    Finds the run's logs (any format `logs` reads) and checkpoints (any format `scan` reads) under run_dir,
    runs the log detectors (spikes, cliffs, stalls, NaN), scans and checks every checkpoint (clean /
    non-finite / torn / corrupt / unreadable), joins them on one step timeline and names the likely cause of
    each anomaly with its evidence, and the last healthy checkpoint to resume from. A log it could not read is
    listed first as NOT READ."""
    return answer(
        tool("triage"),
        lambda: tools.triage(
            target,
            run_dir,
            threshold=threshold,
            stall_floor_s=stall_floor_s,
            events=list(events),
            timeout=timeout_s,
        ),
        target=target,
    )


def scan(
    paths: Paths,
    target: Target = tools.LOCAL,
    stats: Annotated[
        bool, Field(description="Add min/max/mean/std/absmax/L2/zero fraction per tensor.")
    ] = False,
    verify: Annotated[bool, Field(description="Also check zip CRC32s and storage sizes.")] = False,
    timeout_s: Timeout = 1800,
) -> Annotated[CallToolResult, ScanDocument]:
    """Find NaN/+Inf/-Inf in checkpoints (weights and optimizer state) without torch and without executing
    anything from the files.

    Reads torch zip (.pt/.pth/.bin/.ckpt: plain, Lightning, DeepSpeed) and legacy files, safetensors, Hugging
    Face sharded checkpoints (*.index.json) and torch.distributed.checkpoint directories, detected by content.
    Per file: verdict (clean, nonfinite, suspicious pickle global, corrupt, unreadable) and each bad tensor's
    counts and first bad index."""
    return answer(
        tool("scan"),
        lambda: tools.scan(target, paths, stats=stats, verify=verify, timeout=timeout_s),
        target=target,
    )


def check(
    paths: Paths, target: Target = tools.LOCAL, timeout_s: Timeout = 1800
) -> Annotated[CallToolResult, CheckDocument]:
    """Is each checkpoint one consistent snapshot? A verdict per checkpoint — consistent, torn (it mixes
    optimizer steps), corrupt (damaged container), unknown (not enough evidence) or unreadable — with the
    evidence that decided it.

    Evidence: Adam step counters equal each other and the step field, exp_avg_sq >= 0, the Adam bound on
    |m|/sqrt(v), state shaped like its parameter, bf16/fp16 weights equal the cast of their fp32 master,
    zip CRC32s, DCP chunks tiling each tensor, HF index entries, the CheckpointWriter manifest; and
    NaN/Inf."""
    return answer(tool("check"), lambda: tools.check(target, paths, timeout=timeout_s), target=target)


def diff(
    a: Annotated[str, Field(description="The reference checkpoint, on the target.")],
    b: Annotated[str, Field(description="The checkpoint compared with a, on the target.")],
    target: Target = tools.LOCAL,
    timeout_s: Timeout = 1800,
) -> Annotated[CallToolResult, DiffDocument]:
    """What changed between two checkpoints, tensor by tensor, without torch: identical, changed (relative
    change ||A-B||/||A|| and max |A-B|), added, removed, shape or dtype changed; per module; and for two
    checkpoints of one run, parameters that did not move and parameters whose optimizer step moved while
    their weights did not (or the reverse) — what a save that mixed steps leaves behind."""
    return answer(tool("diff"), lambda: tools.diff(target, a, b, timeout=timeout_s), target=target)


def logs(
    paths: Annotated[
        list[str],
        Field(
            min_length=1, description="Log files or directories on the target (format detected by content)."
        ),
    ],
    target: Target = tools.LOCAL,
    threshold: Threshold = 6.0,
    window: Annotated[
        int, Field(ge=5, description="Rows in the trailing window of the median/MAD baselines.")
    ] = 50,
    stall_factor: Annotated[
        float, Field(gt=0, description="A stall is a gap >= this x the usual one...")
    ] = 5.0,
    stall_floor_s: Annotated[float, Field(ge=0, description="...and at least this many seconds.")] = 10.0,
    events: Events = (),
    checkpoints: Annotated[
        str | None,
        Field(description="A checkpoint directory on the target: its files' names/mtimes are save events."),
    ] = None,
    timeout_s: Timeout = 900,
) -> Annotated[CallToolResult, LogsDocument]:
    """Find loss spikes, accuracy cliffs, stalls, NaN/Inf and missing values in training logs, each tied to
    the event before it (a checkpoint save, a resume, an LR change), with a suggested next step.

    Reads JSONL, CSV/TSV, W&B exports, Lightning metrics.csv, HF trainer_state.json, TensorBoard event files
    and plain-text logs (llm.c, Megatron, Python logging, `step 10 | loss 2.3`, key=value ...)."""
    options = {
        "threshold": threshold,
        "window": window,
        "stall_factor": stall_factor,
        "stall_floor_s": stall_floor_s,
        "event_patterns": list(events),
        "checkpoints": checkpoints,
    }
    return answer(
        tool("logs"), lambda: tools.logs(target, paths, timeout=timeout_s, **options), target=target
    )


def watch_tail(
    path: Annotated[str, Field(description="One growing text or JSONL training log on the target.")],
    target: Target = tools.LOCAL,
    lines: Annotated[
        int, Field(ge=2, le=1_000_000, description="How many of the log's last lines to read.")
    ] = 5000,
    since_step: Annotated[
        float | None, Field(description="Only findings after this step (the last step you saw) when given.")
    ] = None,
    threshold: Threshold = 6.0,
    events: Events = (),
    timeout_s: Timeout = 120,
) -> Annotated[CallToolResult, WatchTailDocument]:
    """The latest findings of a (growing) training log: reads only the log's last lines where it is — cheap
    on a 500 MB log — and runs the detectors `watch` runs (spikes, cliffs, stalls, NaN/Inf). Call it again
    with since_step set to the last step you saw to get only what is new."""
    options = {
        "lines": lines,
        "since_step": since_step,
        "threshold": threshold,
        "event_patterns": list(events),
    }
    return answer(
        tool("watch_tail"),
        lambda: tools.watch_tail(target, path, timeout=timeout_s, **options),
        target=target,
    )


def probe(
    target: Target = tools.LOCAL,
    cuda: Annotated[
        bool, Field(description="Import torch in each interpreter to ask about CUDA (slower).")
    ] = True,
    timeout_s: Timeout = 300,
) -> Annotated[CallToolResult, ProbeDocument]:
    """What is on a machine: Python interpreters in discovery order (versions; numpy, torch, CUDA), GPUs
    (nvidia-smi), free disk, load, memory, and running Python processes (training ones flagged). Use it first
    on an unknown target to pick the interpreter (then name it in `run`'s target: `//venv=...`)."""
    return answer(tool("probe"), lambda: tools.probe(target, cuda=cuda, timeout=timeout_s), target=target)


def run(
    script: Annotated[str, Field(description="The Python script's source text (not a path).")],
    args: Annotated[
        tuple[str, ...],
        Field(description="Its arguments: sys.argv[1:], passed exactly, never through a shell."),
    ] = (),
    target: Target = tools.LOCAL,
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
        tool("run"),
        lambda: tools.run(target, script, list(args), need=list(need), timeout=timeout_s),
        target=target,
    )


TOOLS: tuple[Tool, ...] = (
    Tool(triage, summary.triage),
    Tool(scan, summary.scan),
    Tool(check, summary.check),
    Tool(diff, summary.diff),
    Tool(logs, summary.logs),
    Tool(
        watch_tail,
        summary.watch_tail,
        document_help="the summary document `trainprobe watch --json` ends with, plus `tail` (the bytes "
        "read)",
    ),
    Tool(probe, summary_remote.probe, fleet=True),
    Tool(run, summary_remote.run, read_only=False, fleet=True, failure=tools.run_failure),
)


def tool(name: str) -> Tool:
    """The record of the tool named ``name``."""
    for record in TOOLS:
        if record.name == name:
            return record
    raise KeyError(name)


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
