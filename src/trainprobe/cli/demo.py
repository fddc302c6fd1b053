"""`trainprobe demo`."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.cli.triage import render_triage


@app.command()
def demo(
    workdir: str | None = typer.Option(
        None, "--dir", help="Where to write the demo runs (default: a new temporary directory)."
    ),
    quick: bool = typer.Option(False, "--quick", help="A shorter run (200 steps instead of 300)."),
    remote: bool | None = typer.Option(
        None,
        "--remote/--no-remote",
        help="Also triage through `--on ssh=localhost` (default: when ssh localhost accepts your key).",
    ),
) -> None:
    """The seed's story on your CPU in well under two minutes, and `trainprobe triage` telling it.

    A small model trains with the naive background-thread save on (simulated) slow storage: torn checkpoints,
    loss spikes after saves that stall logging, and a late corrupt batch that blows up the optimizer state.
    Then `triage` diagnoses the run from its own log and checkpoints and writes the HTML report; the same
    training saved with trainprobe.save.CheckpointWriter comes out with no stall and no torn checkpoint. When
    `ssh localhost` accepts your key, the triage also runs through `--on`.

    Needs torch (pip install 'trainprobe[torch]'). Everything is kept in the directory it prints, so you can
    run `trainprobe triage`, `scan`, `check` and `logs` on it yourself.

    Exit codes: 0 when triage found the story the demo planted; 1 when it did not; 2 without torch.
    """
    from trainprobe.demo import run_demo, story_found

    out = Output()
    counter = iter(range(1, 100))

    def narrate(line: str) -> None:
        out.console.print(f"[bold]{next(counter)}.[/] {escape(line)}", soft_wrap=True)

    with reported_errors(out):
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
    raise typer.Exit(0 if story_found(run) else 1)
