"""`trainprobe demo`: the seed's story trained on this CPU, and `trainprobe triage` telling it."""

from __future__ import annotations

import argparse

from trainprobe.cli._command import Command, CommandParser
from trainprobe.cli._output import Console, Output
from trainprobe.cli._plain import escape
from trainprobe.cli.triage import render_triage

_HELP = (
    "A small model trains with the naive background-thread save on (simulated) slow storage: torn "
    "checkpoints, loss spikes after saves that stall logging, and a late corrupt batch that blows up the "
    "optimizer state. All of it is staged at fixed steps (the log is stamped with the run's simulated "
    "clock), so the story is the same on every run, however busy the machine. Then `triage` diagnoses the "
    "run from its own log and checkpoints and writes the HTML report; the same training saved with "
    "trainprobe.save.CheckpointWriter comes out with no stall and no torn checkpoint. When `ssh localhost` "
    "accepts your key, the triage also runs through `--on`.\n\n"
    "Needs torch (pip install 'trainprobe[demo]'). Everything is kept in the directory it prints, so you "
    "can run `trainprobe triage`, `scan`, `check` and `logs` on it yourself."
)

_EPILOG = (
    "Exit codes: 0 when triage found exactly the story the demo planted (which saves tore, the spike after "
    "each, the blow-up, where to resume); 1 when it did not; 2 without torch."
)


def add_arguments(parser: CommandParser) -> None:
    options = parser.add_argument_group("options")
    options.add_argument(
        "--dir", dest="workdir", metavar="DIR",
        help="Where to write the demo runs (default: a new temporary directory).",
    )  # fmt: skip
    options.add_argument("--quick", action="store_true", help="A shorter run (200 steps instead of 300).")
    options.add_argument(
        "--remote", action=argparse.BooleanOptionalAction, default=None,
        help="Also triage through `--on ssh=localhost` (default: when ssh localhost accepts your key).",
    )  # fmt: skip


def demo(*, workdir: str | None, quick: bool, remote: bool | None) -> int:
    from trainprobe.demo import run_demo, story_found

    out = Output()
    counter = iter(range(1, 100))

    def narrate(line: str) -> None:
        out.console.print(f"[bold]{next(counter)}.[/] {escape(line)}", soft_wrap=True)

    out.console.print("[dim]training with the naive background-thread save…[/]")
    run = run_demo(workdir, quick=quick, remote=remote, notify=narrate)

    def render(console: Console) -> None:
        console.print()
        console.rule("trainprobe triage of the naive run")
        render_triage(console, run.results["naive"])
        console.print()
        console.print(f"HTML report: [bold]{run.results['naive_html']}[/]", soft_wrap=True)
        console.print(
            f"Try it yourself: [bold]trainprobe triage {run.workdir / 'naive'}[/] "
            f"(and on {run.workdir / 'writer'}; add --json or --html FILE)",
            soft_wrap=True,
        )

    out.result({"workdir": str(run.workdir), "steps": run.steps}, render)
    return 0 if story_found(run) else 1


COMMAND = Command(_HELP, "[options]", add_arguments, demo, _EPILOG, reports=False)
