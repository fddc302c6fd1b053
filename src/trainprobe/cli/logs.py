"""`trainprobe logs`."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.errors import UsageError

if TYPE_CHECKING:  # imported where used: trainprobe.metrics pulls in numpy, which every command would pay for
    from rich.console import Console

    from trainprobe.metrics import LogReport, RunLog

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


def render_report(report: LogReport, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from trainprobe.metrics.findings import fmt_step

    for run in report.runs:
        console.print(_run_line(run, fmt_step, escape))
    if not report.findings:
        console.print("[green]no findings: the log looks healthy[/]")
        return
    table = Table(show_header=True, header_style="bold", expand=False, show_lines=False)
    for col in ("severity", "run", "metric", "step", "what happened / next step"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        table.add_row(
            f"[{_STYLE[f.severity]}]{f.severity}[/]",
            escape(f.run),
            escape(f.metric),
            fmt_step(f.step),
            escape(f.message) + (f"\n[dim]→ {escape(f.suggestion)}[/]" if f.suggestion else ""),
        )
    console.print(table)
    counts = ", ".join(f"{report.count(s)} {s}" for s in ("error", "warning", "info"))
    console.print(f"{len(report.findings)} findings: {counts}")


def _names(names: list[str], shown: int) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" (+{more} more)" if more > 0 else "")


def _run_line(run: RunLog, fmt_step: Callable[[float], str], escape: Callable[[str], str]) -> str:
    """One run's header: what was read, on which axis, and which columns are watched. Counters (epoch,
    batch size, tokens seen) and timings are named apart: the detectors judge only the metrics."""
    wall = "wall clock" if run.wall is not None and (run.wall == run.wall).any() else "no wall clock"
    steps = f"steps {fmt_step(run.steps.min())}–{fmt_step(run.steps.max())}" if len(run) else "no steps"
    line = (
        f"[bold]{escape(run.name)}[/] ({run.format}, {len(run)} rows, {steps}, {wall}): "
        f"{escape(_names(run.metrics, 8) or 'no metrics')}"
    )
    rest = []
    for role in ("counter", "timing"):
        names = [c for c in run.columns if run.role(c) == role]
        if names:
            rest.append(f"{role}s {_names(names, 4)}")
    return line + (f"[dim]; {escape('; '.join(rest))}[/]" if rest else "")


def exit_code_for(report: LogReport, fail_on: str) -> int:
    from trainprobe.metrics.findings import SEVERITY_RANK

    if fail_on == "never" or report.worst is None:
        return 0
    return 1 if SEVERITY_RANK[report.worst] <= SEVERITY_RANK[fail_on] else 0


@app.command()
def logs(
    paths: list[Path] = typer.Argument(
        ..., help="Log files or directories (format detected from the content)."
    ),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout (schema_version 1)."),
    html: Path | None = typer.Option(
        None, "--html", help="Write a self-contained HTML report (works offline)."
    ),
    png: Path | None = typer.Option(
        None, "--png", help="Write PNG charts (needs the plot extra: matplotlib)."
    ),
    fail_on: FailOn = typer.Option(
        FailOn.error, "--fail-on", help="Exit 1 when a finding is at least this severe."
    ),
    event: list[str] = typer.Option([], "--event", help="Regex: matching log lines are events (repeatable)."),
    checkpoints: Path | None = typer.Option(
        None, "--checkpoints", help="Checkpoint directory: its files' names/mtimes are save events."
    ),
    threshold: float = typer.Option(6.0, "--threshold", help="Spike threshold (modified z-score)."),
    window: int = typer.Option(50, "--window", help="Rows in the trailing window for median/MAD baselines."),
    stall_factor: float = typer.Option(
        5.0, "--stall-factor", help="A stall is a gap ≥ this × the usual one..."
    ),
    stall_floor: float = typer.Option(10.0, "--stall-floor", help="...and at least this many seconds."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No report on stdout; only the exit code."),
) -> None:
    """Find loss spikes, accuracy cliffs, stalls, NaN/Inf and missing values in training logs, each tied to
    the event before it (a checkpoint save, a resume, an LR change) with a suggested next step.

    Reads JSONL, CSV/TSV, W&B exports, Lightning metrics.csv, HF trainer_state.json, TensorBoard event files
    and plain-text logs (llm.c, Megatron, `step 10 | loss 2.3`, `key=value` ...).

    \b
    Examples:
      trainprobe logs train.log
      trainprobe logs runs/ --json > findings.json
      trainprobe logs train.log --html report.html --checkpoints ckpt/
      trainprobe logs train.log --event 'preempted' --fail-on warning   # CI gate

    Exit codes: 0 healthy (nothing at --fail-on or worse), 1 findings, 2 unreadable input or bad flags.
    """
    from trainprobe.metrics import Options, analyze

    out = Output(json_mode=json_out, quiet=quiet)
    with reported_errors(out):
        if checkpoints is not None and not checkpoints.is_dir():
            raise UsageError(f"--checkpoints {checkpoints}: not a directory")
        if window < 5:
            raise UsageError("--window must be at least 5")
        options = Options(
            threshold=threshold,
            window=window,
            stall_factor=stall_factor,
            stall_floor_s=stall_floor,
            event_patterns=list(event),
            checkpoints=checkpoints,
        )
        report = analyze(paths, options=options)
        if html is not None:
            from trainprobe.metrics.html import render_html

            html.write_text(render_html(report), encoding="utf-8")
            out.note(f"HTML report written to {html}")
        if png is not None:
            from trainprobe.metrics.plot import render_png

            try:
                render_png(report, png)
            except UsageError as exc:
                # Output.error renders rich markup, which would swallow the "[plot]" of the install hint.
                out.err.print(f"error: {exc}", markup=False, highlight=False, style="bold red")
                raise typer.Exit(exc.exit_code) from None
            out.note(f"PNG charts written to {png}")
        out.result(report.to_json(), lambda console: render_report(report, console))
    code = exit_code_for(report, fail_on.value)
    if code:
        raise typer.Exit(code)
