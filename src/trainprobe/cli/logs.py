"""`trainprobe logs`: what training logs say (spikes, cliffs, stalls, NaN), each tied to the event before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainprobe.cli._command import Command, CommandParser
from trainprobe.cli._detectors import SEVERITY_STYLE, add_detector_options, add_fail_on, add_max_logs
from trainprobe.cli._fleet import show_report
from trainprobe.cli._output import Console, Output
from trainprobe.cli._verdicts import FLEET_EXIT_CODES
from trainprobe.cli._where import Remote, Where, is_fleet
from trainprobe.errors import UsageError
from trainprobe.plugins import LOG_READERS, RUN_DIR_READERS, help_list

if TYPE_CHECKING:  # imported where used: trainprobe.metrics pulls in numpy, which every command would pay for
    from trainprobe.metrics import LogReport, RunLog


_LOGS_HELP = (
    f"Reads {help_list(LOG_READERS)}, and {help_list(RUN_DIR_READERS)}; the format is detected from the "
    "content. Each finding comes with the event before it (a checkpoint save, a resume, "
    "an LR change) and a suggested next step.\n\n"
    "--on reads the logs where they are (ssh=host//docker=trainer, see trainprobe run --help): only "
    "trainprobe's readers and numpy are needed there, the paths (and --checkpoints) are paths there, and the "
    "report, --html and --png come out as a local run gives them. Repeat --on, or give a range "
    "(ssh=node[01-04]), a name or group from the targets file, or slurm=JOBID, for a fleet: one report per "
    "target, then a table of the targets."
)

_LOGS_EPILOG = (
    "examples:\n"
    "  trainprobe logs train.log\n"
    "  trainprobe logs runs/ --json > findings.json\n"
    "  trainprobe logs train.log --html report.html --checkpoints ckpt/\n"
    "  trainprobe logs train.log --event 'preempted' --fail-on warning   # CI gate\n"
    "  trainprobe logs odd.log --pattern 'it (?P<step>\\d+) loss=(?P<loss>\\S+)'   a line shape of your own\n"
    "  trainprobe logs /runs/3/train.log --on ssh=user@gpu07//venv=/opt/venv   where the log is\n"
    "  trainprobe logs /runs/3/train.log --on ssh=gpu07 --html report.html     the HTML written here\n"
    "  trainprobe logs /local/run/train.log --on 'ssh=node[01-04]'   one report per node, then a table\n\n"
    "Exit codes: 0 healthy (nothing at --fail-on or worse), 1 findings, 2 unreadable input (or a log read "
    "only in part: more numeric lines of a repeating shape left unread than read as rows) or bad flags. "
    f"{FLEET_EXIT_CODES}"
)


def render_report(report: LogReport, console: Console) -> None:
    from trainprobe.cli._plain import Table, escape
    from trainprobe.conventions import step_text
    from trainprobe.metrics.log_facts import log_facts

    for run in report.runs:
        console.print(_run_line(run, step_text, escape))
    render_not_read(report, console)
    for name, events in report.events.items():
        for e in [e for e in events if e.kind == "failure"][:3]:
            console.print(
                f"[bold red]failed[/] {escape(name)} after step {step_text(e.step)}: {escape(e.text[:160])}",
                soft_wrap=True,
            )
    for run, why in report.partly_read:
        console.print(
            f"[bold yellow]partly read[/] {escape(run.path or run.name)}: {escape(why)}", soft_wrap=True
        )
    for fact in log_facts(report.runs):  # the log's own facts (trainprobe.metrics.log_facts)
        console.print(f"[yellow]fact[/] {escape(fact.text)}", soft_wrap=True)
    if not report.findings:
        if report.not_read or report.partly_read:
            console.print("[yellow]no findings in what was read: the report is incomplete[/]")
        elif any(e.kind == "failure" for events in report.events.values() for e in events):
            console.print("[yellow]no findings in the metrics, but the log reports a failure (above)[/]")
        else:
            console.print("[green]no findings: the log looks healthy[/]")
        return
    table = Table(show_header=True, header_style="bold", expand=False, show_lines=False)
    for col in ("severity", "run", "metric", "step", "what happened / next step"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        table.add_row(
            f"[{SEVERITY_STYLE[f.severity]}]{f.severity}[/]",
            escape(f.run),
            escape(f.metric),
            step_text(f.step),
            escape(f.message) + (f"\n[dim]→ {escape(f.suggestion)}[/]" if f.suggestion else ""),
        )
    console.print(table)
    counts = ", ".join(f"{report.count(s)} {s}" for s in ("error", "warning", "info"))
    console.print(f"{len(report.findings)} findings: {counts}")


def _names(names: list[str], shown: int) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" (+{more} more)" if more > 0 else "")


def _run_line(run: RunLog, step_text: Callable[[float], str], escape: Callable[[str], str]) -> str:
    """One run's header: what was read, on which axis, and which columns are watched. Counters (epoch,
    batch size, tokens seen) and timings are named apart: the detectors judge only the metrics."""
    wall = "wall clock" if run.wall is not None and (run.wall == run.wall).any() else "no wall clock"
    steps = f"steps {step_text(run.steps.min())}–{step_text(run.steps.max())}" if len(run) else "no steps"
    if len(run) and run.step_key is not None and not run.step_key.startswith("#"):
        steps += f" by {run.step_key}"
    line = (
        f"[bold]{escape(run.name)}[/] ({run.format}, {len(run)} rows, {steps}, {wall}): "
        f"{escape(_names(run.metrics, 8) or 'no metrics')}"
    )
    rest = []
    for role in ("counter", "timing"):
        names = [c for c in run.columns if run.role(c) == role]
        if names:
            rest.append(f"{role}s {_names(names, 4)}")
    cover = run.coverage
    if cover is not None and cover.numeric_lines > cover.row_lines:
        rest.append(f"{cover.row_lines} of {cover.numeric_lines} lines with numbers read as rows")
    return line + (f"[dim]; {escape('; '.join(rest))}[/]" if rest else "")


def render_not_read(report: LogReport, console: Console, *, shown: int = 20) -> None:
    """The paths that could not be read (a report with any is incomplete: exit 2)."""
    from trainprobe.cli._plain import escape

    for n in report.not_read[:shown]:
        console.print(f"[bold red]not read[/] {escape(n.path)}: {escape(n.why)}", soft_wrap=True)
    if len(report.not_read) > shown:
        console.print(f"[bold red]not read[/] … and {len(report.not_read) - shown} more (see --json)")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH...",
        help="Log files or directories (format detected from the content).",
    )  # fmt: skip
    options = parser.add_argument_group("options")
    add_fail_on(options, when="")
    options.add_argument(
        "--checkpoints", type=Path, metavar="DIR",
        help="Checkpoint directory: its files' names/mtimes are save events.",
    )  # fmt: skip
    options.add_argument(
        "--pattern", metavar="REGEX",
        help="Read each line of a text log with REGEX, named groups the step and the metrics, e.g. "
        "'it (?P<step>\\d+) loss=(?P<loss>\\S+)': for a line shape trainprobe does not know. A REGEX "
        "that repeats a repeat or an alternation ((a+)+, (a|ab)*: it could run for minutes on one line) is "
        "refused, and lines over 4096 characters are not tried (also for --event).",
    )  # fmt: skip
    options.add_argument(
        "--step", metavar="KEY",
        help="The column that is the step axis (e.g. --step global_step), instead of the one trainprobe "
        "picks from the records (the report says which it picked, and why).",
    )  # fmt: skip
    add_max_logs(options)
    add_detector_options(options)
    output = parser.group("output")
    output.add_argument(
        "--html", type=Path, metavar="FILE", help="Write a self-contained HTML report (works offline)."
    )
    output.add_argument(
        "--png", type=Path, metavar="FILE", help="Write PNG charts (needs the plot extra: matplotlib)."
    )


def logs(
    paths: list[Path],
    *,
    html: Path | None,
    png: Path | None,
    fail_on: str,
    event: list[str],
    checkpoints: Path | None,
    pattern: str | None,
    step: str | None,
    max_logs: int,
    threshold: float,
    window: int,
    stall_factor: float,
    stall_floor: float,
    out: Output,
    where: Where,
) -> int:
    from trainprobe.metrics import Options, analyze

    options = Options(
        threshold=threshold,
        window=window,
        stall_factor=stall_factor,
        stall_floor_s=stall_floor,
        event_patterns=list(event),
        checkpoints=checkpoints,
        pattern=pattern,
        step=step,
        max_logs=max_logs,
    )
    if where.on and (html is not None or png is not None) and is_fleet(where.targets()):
        raise UsageError(
            "--html and --png take one target, not a fleet",
            hint="run once per target with --on TARGET --html FILE",
        )

    def here() -> LogReport:
        return analyze(paths, options=options)

    def document(report: LogReport) -> dict[str, object]:
        """The report's JSON, once the --html and --png files are written (one target or here only)."""
        _write_files(out, report, html, png)
        return report.to_json(fail_on=fail_on)

    return show_report(
        out, where, paths, here=here, render=lambda console, report: render_report(report, console),
        summarise=_logs_summary, title="logs read", code_of=lambda report: report.exit_code_for(fail_on),
        result=document, names_as_i_json=False, options=options,
    )  # fmt: skip


def _write_files(out: Output, report: LogReport, html: Path | None, png: Path | None) -> None:
    """--html and --png, written here (for logs read on a target too)."""
    if html is not None:
        from trainprobe.metrics.html import render_html

        try:
            html.write_text(render_html(report), encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            raise UsageError(f"--html {html}: cannot write ({exc.strerror or exc})") from None
        out.note(f"HTML report written to {html}")
    if png is not None:
        from trainprobe.metrics.plot import render_png

        render_png(report, png)
        out.note(f"PNG charts written to {png}")


def _logs_summary(report: LogReport) -> str:
    counts = ", ".join(f"{report.count(s)} {s}" for s in ("error", "warning", "info"))
    return f"{len(report.runs)} run(s): {counts if report.findings else 'no findings'}"


COMMAND = Command(
    _LOGS_HELP, "PATH... [options]", add_arguments, logs, _LOGS_EPILOG,
    remote=Remote(
        "fleet", "Read the logs on a remote target (ssh=user@host...).", "the remote analysis",
        heading="where the logs are (--on)", task="logs:logs",
    ),
    json_help="One JSON document on stdout (schema_version 3; a fleet: the fleet document, each target's "
    "report in its result).",
    quiet_help="No report on stdout; only the exit code.",
)  # fmt: skip
