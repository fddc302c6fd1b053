"""`trainprobe triage`: the whole diagnosis of one run directory (here or where the files are)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainprobe.cli._command import Command, CommandParser, at_least
from trainprobe.cli._detectors import add_detector_options, add_max_logs
from trainprobe.cli._output import Console, Output
from trainprobe.cli._plain import Table, escape
from trainprobe.cli._verdicts import STYLE
from trainprobe.cli._where import Remote, Where
from trainprobe.conventions import step_text
from trainprobe.errors import UsageError
from trainprobe.json_names import i_json

_HELP = """Finds the run's logs (any format `trainprobe logs` reads) and checkpoint units (any that
`trainprobe check` reads) under RUN_DIR, runs the log detectors, checks every unit in parallel, and joins them
on one timeline. Each save the log records (its step, its time, the path it names) is matched to the
unit it wrote; where a unit's files, its name or folder and the log name different steps, the report
says so and which it trusts (what the save itself wrote: check's step). Units holding the same
tensors (or the same bytes) are reported as duplicates. A log it could not read comes first, as a
problem. Then the four answers: what is broken where (NaN/Inf by tensor, torn units by step group),
what the logs show (spikes, stalls, cliffs and the events before them), what caused what (a spike
right after a save that stalled logging and wrote a torn unit: the save raced training; NaN with no
save near it and NaN/Inf in the next unit's optimizer state: a gradient explosion), and which unit
to resume from and why. A unit's verdict and step are the ones `trainprobe check` gives."""

_EPILOG = """examples:
  trainprobe triage runs/exp3
  trainprobe triage runs/exp3 --html triage.html    curves, saves, stalls, anomalies and verdicts on one axis
  trainprobe triage runs/exp3 --json | jq .answers
  trainprobe triage --on ssh=me@gpu07 /scratch/exp3  where the files are (needs only Python + numpy there)

Exit codes: 1 an anomaly in the logs or a finding in a unit (nonfinite, torn, corrupt, suspicious), or the
remote run failed; 2 a log or unit that could not be read and nothing found, a usage error, or nothing
readable in RUN_DIR; 0 healthy (the rule of scan and check, trainprobe.checkpoint.verdict)."""

_CAUSE_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def render_triage(console: Console, report: object) -> None:
    """What could not be read first, the units, then the four answers in the order users ask them."""
    from trainprobe.triage import TriageReport

    assert isinstance(report, TriageReport)
    where = f" on {report.target}" if report.target else ""
    console.print(
        f"[bold]{escape(report.run_dir)}[/]{escape(where)}: {len(report.log_files)} log file(s), "
        f"{len(report.checkpoints)} checkpoint(s), {len(report.anomalies)} anomaly(ies) "
        f"[dim]({report.seconds:.1f} s)[/]"
    )
    for problem in report.problems:
        console.print(f"[bold yellow]! {escape(problem.text())}[/]", soft_wrap=True)
    if report.checkpoints:
        table = Table(show_header=True, header_style="bold", show_edge=False, box=None, padding=(0, 1))
        for col in ("step", "checkpoint", "verdict", "evidence"):
            table.add_column(col, overflow="fold")
        for c in report.checkpoints:
            style = STYLE.get(c.verdict, "")
            reason = c.reason.split(" — ")[0]
            saved = f"; the log's save at step {step_text(c.saved_at['step'])}" if c.saved_at else ""
            table.add_row(
                step_text(c.step),
                escape(c.relpath),
                f"[{style}]{c.verdict}[/]",
                escape(reason if len(reason) <= 110 else reason[:107] + "…")
                + f" [dim]({escape(c.step_origin)}{escape(saved)})[/]",
            )
        console.print(table)
    answers = report.answers
    for title, key in (
        ("what is broken where", "broken"),
        ("what the logs show", "logs"),
        ("what caused what", "causes"),
        ("where to resume", "resume"),
    ):
        console.print(f"\n[bold]{title}[/]")
        lines = [] if key == "causes" and report.conclusions else answers[key]["lines"]
        for line in lines:
            console.print(f"  {escape(line)}", soft_wrap=True)
        if key == "causes":
            for i, conclusion in enumerate(report.conclusions, 1):
                console.print(
                    f"  [bold]{i}. step {step_text(conclusion.step)}: {escape(conclusion.title)}[/] "
                    f"[{_CAUSE_STYLE[conclusion.confidence]}]({conclusion.confidence} confidence)[/]"
                )
                for line in conclusion.evidence:
                    console.print(f"     • {escape(line)}", soft_wrap=True)
                console.print(f"     [dim]→ {escape(conclusion.suggestion)}[/]", soft_wrap=True)
    verdict = {0: "[green]healthy[/]", 1: "[bold red]problems found[/]"}.get(
        report.exit_code, "[yellow]not everything could be read[/]"
    )
    console.print(f"\nverdict: {verdict}")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The run's directory (logs and checkpoints).")
    options = parser.add_argument_group("options")
    add_detector_options(options, stall="floor")
    add_max_logs(options)
    options.add_argument("--workers", type=at_least(1), metavar="N", help="Checkpoints checked at once.")
    parser.group("output").add_argument(
        "--html", dest="html_path", type=Path, metavar="FILE", help="Write the self-contained HTML report."
    )


def triage(
    run_dir: str,
    *,
    html_path: Path | None,
    threshold: float,
    stall_floor: float,
    event: list[str],
    max_logs: int,
    workers: int | None,
    out: Output,
    where: Where,
) -> int:
    options: dict[str, Any] = {
        "threshold": threshold, "stall_floor_s": stall_floor, "event_patterns": list(event),
        "max_logs": max_logs, "workers": workers,
    }  # fmt: skip
    from trainprobe.triage import render_triage_html

    if where.on:
        target = where.one(
            refusal="triage diagnoses one run directory on one target",
            hint="run one triage per target (slurm=JOB@NODE for one node of a job)",
        )
        out.note(f"triaging {run_dir} on {target}")
        report = where.task_on(target, run_dir, **options)
    else:
        from trainprobe.triage import triage as run_triage

        with out.progress("triage", total=1.0) as advance:
            report = run_triage(run_dir, progress=advance, **options)
    if report.logs is None and not report.checkpoints and not report.problems:
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
    out.result(i_json(report.to_json()), lambda console: render_triage(console, report))
    if html_path is not None:
        out.note(f"HTML report: {html_path}")
    return int(report.exit_code)


COMMAND = Command(
    _HELP, "RUN_DIR [options]", add_arguments, triage, _EPILOG,
    remote=Remote(
        "one", "Triage on a remote target (ssh=user@host..., a name from the targets file).",
        "the remote work", task="triage:triage",
    ),
    schema_version=3,
)  # fmt: skip
