"""`trainprobe demo`."""

from __future__ import annotations

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.cli.scan import render_scan_report


@app.command()
def demo(
    workdir: str | None = typer.Option(
        None, "--dir", help="Where to write the demo checkpoints (default: a new temporary directory)."
    ),
) -> None:
    """Train a tiny model with torch, let one step explode, and watch trainprobe find the NaN/Inf.

    Needs torch (pip install 'trainprobe[torch]'); takes a few seconds on CPU. The checkpoints are kept, so
    you can run `trainprobe scan DIR` on them yourself. Exit 0 when the demo ran and found what it planted.
    """
    from trainprobe.demo import run_demo

    out = Output()
    with reported_errors(out):
        run = run_demo(workdir)
    report = run.results["scan"]

    def render(console: object) -> None:
        from rich.console import Console

        assert isinstance(console, Console)
        for i, line in enumerate(run.steps, 1):
            console.print(f"[bold]{i}.[/] {line}")
        console.print()
        render_scan_report(console, report)
        console.print()
        console.print(f"Try it yourself: [bold]trainprobe scan {run.workdir}[/] (add --stats or --json)")

    out.result({"workdir": str(run.workdir), "steps": run.steps, "scan": report.to_json()}, render)
    raise typer.Exit(0 if report.exit_code == 1 else 1)
