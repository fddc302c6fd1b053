"""`trainprobe triage`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.errors import UsageError

_HELP = """The whole diagnosis of one run in one command: what went wrong, when, why, and which checkpoint to
resume from.

Finds the run's logs (any format `trainprobe logs` reads) and checkpoints (any format `trainprobe
scan` reads) under RUN_DIR, runs the log detectors, scans and checks every checkpoint in parallel,
and joins them on one timeline: events (saves, stalls, resumes, LR changes), anomalies (spikes,
cliffs, NaN) and checkpoint verdicts (clean / non-finite / torn / corrupt / unreadable). Then it
names the likely cause of each anomaly with its evidence — a spike right after a save that stalled
logging and wrote a torn checkpoint: the save raced training; a cliff with no save near it and
NaN/Inf in the next checkpoint's optimizer state: a gradient explosion — and the last healthy
checkpoint. A checkpoint's step comes from its step field, its CheckpointWriter manifest, its file
name (step_2000.pt, checkpoint-2000) or, last, its mtime against the log's wall clock; the report
says which.

\b
Examples:
  trainprobe triage runs/exp3
  trainprobe triage runs/exp3 --html triage.html    the report with charts and the checkpoint timeline
  trainprobe triage runs/exp3 --json | jq .conclusions
  trainprobe triage --on ssh=me@gpu07 /scratch/exp3  where the files are (needs only Python + numpy there)

\b
Exit codes: 0 healthy (no anomaly, every checkpoint clean); 1 problems found (or the remote run failed);
2 usage error or nothing readable in RUN_DIR."""

_CAUSE_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}
_VERDICT_STYLE = {
    "clean": "green",
    "nonfinite": "bold red",
    "suspicious": "bold red",
    "torn": "bold yellow",
    "corrupt": "yellow",
    "unreadable": "dim",
}


def _step(x: float | None) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def render_triage(console: Console, report: object) -> None:
    from trainprobe.triage import TriageReport

    assert isinstance(report, TriageReport)
    where = f" on {report.target}" if report.target else ""
    console.print(
        f"[bold]{escape(report.run_dir)}[/]{escape(where)}: {len(report.log_files)} log file(s), "
        f"{len(report.checkpoints)} checkpoint(s), {len(report.anomalies)} anomaly(ies) "
        f"[dim]({report.seconds:.1f} s)[/]"
    )
    for skipped in report.logs_skipped:
        console.print(f"  [dim]skipped {escape(skipped['path'])}: {escape(skipped['why'])}[/]")
    if report.checkpoints:
        table = Table(show_header=True, header_style="bold", show_edge=False, box=None, padding=(0, 1))
        for col in ("step", "checkpoint", "verdict", "evidence"):
            table.add_column(col, overflow="fold")
        for c in report.checkpoints:
            style = _VERDICT_STYLE.get(c.verdict, "")
            reason = c.reason.split(" — ")[0]
            table.add_row(
                _step(c.step),
                escape(c.relpath),
                f"[{style}]{c.verdict}[/]",
                escape(reason if len(reason) <= 110 else reason[:107] + "…")
                + f" [dim](step from its {escape(c.step_source)})[/]",
            )
        console.print(table)
    if not report.conclusions:
        console.print("[green]no anomalies in the logs[/]")
    for i, conclusion in enumerate(report.conclusions, 1):
        console.print(
            f"\n[bold]{i}. step {_step(conclusion.step)}: {escape(conclusion.title)}[/] "
            f"[{_CAUSE_STYLE[conclusion.confidence]}]({conclusion.confidence} confidence)[/]"
        )
        for line in conclusion.evidence:
            console.print(f"   • {escape(line)}", soft_wrap=True)
        console.print(f"   [dim]→ {escape(conclusion.suggestion)}[/]", soft_wrap=True)
    console.print()
    if report.resume_from is not None:
        console.print(
            f"[bold green]resume from[/] [bold]{escape(report.resume_from.relpath)}[/] (step "
            f"{_step(report.resume_from.step)}): {escape(report.resume_reason)}",
            soft_wrap=True,
        )
    else:
        console.print(
            f"[bold red]no checkpoint to resume from:[/] {escape(report.resume_reason)}", soft_wrap=True
        )
    verdict = "[green]healthy[/]" if report.exit_code == 0 else "[bold red]problems found[/]"
    console.print(f"verdict: {verdict}")


@app.command(help=_HELP)
def triage(
    run_dir: str = typer.Argument(..., metavar="RUN_DIR", help="The run's directory (logs and checkpoints)."),
    on: str | None = typer.Option(
        None, "--on", metavar="TARGET", help="Triage on a remote target (ssh=user@host...)."
    ),
    json_mode: bool = typer.Option(
        False, "--json", help="Print the JSON report (schema_version 1) to stdout."
    ),
    html_path: Path | None = typer.Option(
        None, "--html", metavar="FILE", help="Write the self-contained HTML report."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing; only the exit code tells."),
    threshold: float = typer.Option(
        6.0, "--threshold", help="Spike threshold (modified z-score) for the logs."
    ),
    stall_floor: float = typer.Option(
        10.0, "--stall-floor", metavar="SECONDS", help="Shortest gap in logging that counts as a stall."
    ),
    event: list[str] = typer.Option([], "--event", help="Regex: matching log lines are events (repeatable)."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="Checkpoints checked at once."),
    timeout: float = typer.Option(
        3600.0, "--timeout", help="With --on: seconds before the remote work is killed."
    ),
    connect_timeout: float = typer.Option(20.0, "--connect-timeout", help="With --on: seconds to connect."),
) -> None:
    out = Output(json_mode=json_mode, quiet=quiet)
    with reported_errors(out):
        from trainprobe.triage import render_triage_html
        from trainprobe.triage import triage as run_triage

        if stall_floor < 0:
            raise UsageError("--stall-floor must not be negative")
        if on is not None:
            from trainprobe.remote import parse_target

            parse_target(on)  # a malformed target is a usage error before anything starts
            out.note(f"triaging {run_dir} on {on}")
        with out.progress("triage", total=1.0) as advance:
            report = run_triage(
                run_dir,
                on=on,
                threshold=threshold,
                stall_floor_s=stall_floor,
                event_patterns=list(event),
                workers=workers,
                progress=advance,
                timeout=timeout,
                connect_timeout=connect_timeout,
            )
        if report.logs is None and not report.checkpoints:
            if report.log_files:
                why = "; ".join(f"{s['path']}: {s['why']}" for s in report.logs_skipped[:3])
                raise UsageError(f"{run_dir}: no checkpoint, and no metric rows in its logs ({why})")
            raise UsageError(
                f"{run_dir}: no training log and no checkpoint found",
                hint="give the directory that holds the run's logs (*.log, *.jsonl, *.csv, tfevents) "
                "and checkpoints",
            )
        if html_path is not None:
            try:
                html_path.write_text(render_triage_html(report), encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"--html {html_path}: cannot write ({exc.strerror or exc})") from None
        out.result(report.to_json(), lambda console: render_triage(console, report))
        if html_path is not None:
            out.note(f"HTML report: {html_path}")
    raise typer.Exit(report.exit_code)
