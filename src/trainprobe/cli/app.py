"""The one Typer application; each command module adds its command to it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="trainprobe",
    help=(
        "Debug ML training runs at a distance.\n\n"
        "scan: find NaN/Inf in checkpoints without torch.  check/diff: torn snapshots and what changed.\n"
        "run/probe: run a local Python script on a far target through ssh, containers and venvs.\n"
        "logs/watch: spikes, cliffs, stalls and NaN in training logs.  triage: all of it on one run.\n\n"
        "Exit codes: 0 healthy, 1 findings or a failed run, 2 usage error or unreadable input."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
