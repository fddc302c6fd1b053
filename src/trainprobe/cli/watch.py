"""`trainprobe watch`."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.cli.logs import FailOn, exit_code_for, render_report
from trainprobe.errors import UsageError

if TYPE_CHECKING:  # imported where used: trainprobe.metrics pulls in numpy, which every command would pay for
    from trainprobe.metrics import Finding

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def finding_env(f: Finding) -> dict[str, str]:
    """What ``--exec`` gets: the finding in environment variables (and as JSON on stdin)."""
    from trainprobe.metrics.findings import fmt_step

    return {
        "TRAINPROBE_FINDING_KIND": f.kind,
        "TRAINPROBE_FINDING_SEVERITY": f.severity,
        "TRAINPROBE_FINDING_RUN": f.run,
        "TRAINPROBE_FINDING_METRIC": f.metric,
        "TRAINPROBE_FINDING_STEP": fmt_step(f.step),
        "TRAINPROBE_FINDING_MESSAGE": f.message,
        "TRAINPROBE_FINDING_SUGGESTION": f.suggestion,
    }


def run_exec(argv: list[str], f: Finding) -> int:
    """Run the ``--exec`` command as an argv list, never through a shell: finding text cannot inject
    anything."""
    env = {**os.environ, **finding_env(f)}
    proc = subprocess.run(argv, input=json.dumps(f.to_json()).encode(), env=env, check=False)
    return proc.returncode


@app.command()
def watch(
    target_or_path: str = typer.Argument(
        ...,
        metavar="[TARGET] PATH",
        help="The log to follow; with a TARGET first (e.g. ssh=gpu07), a path there.",
    ),
    path: str | None = typer.Argument(None, hidden=True),
    exec_cmd: str | None = typer.Option(
        None,
        "--exec",
        help="Run this command for each new finding (argv split like a shell, run without one); "
        "the finding is in TRAINPROBE_FINDING_* variables and as JSON on stdin.",
    ),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between polls of the file."),
    json_out: bool = typer.Option(
        False, "--json", help="JSON Lines: one object per finding, then the summary."
    ),
    fail_on: FailOn = typer.Option(
        FailOn.error, "--fail-on", help="Exit 1 at the end if a finding is this severe."
    ),
    event: list[str] = typer.Option([], "--event", help="Regex: matching log lines are events (repeatable)."),
    threshold: float = typer.Option(6.0, "--threshold", help="Spike threshold (modified z-score)."),
) -> None:
    """Follow a growing training log like `tail -F` (across rotation), run the detectors as lines arrive and
    print each new finding as it appears. Ctrl-C (or SIGTERM) stops and prints the summary report.

    With a TARGET the file is followed on that machine (through the remote engine: ssh, containers, ...); a
    dropped link reconnects and resumes at the last byte received, so no line is lost or repeated.

    \b
    Examples:
      trainprobe watch train.log
      trainprobe watch ssh=gpu07 /scratch/run3/train.log
      trainprobe watch train.log --exec 'notify-send trainprobe'
      trainprobe watch train.log --json | jq .

    Exit codes: 0 nothing at --fail-on or worse, 1 findings (or the target stayed unreachable), 2 bad flags.
    """
    from rich.markup import escape

    from trainprobe.metrics import Options
    from trainprobe.metrics.findings import fmt_step
    from trainprobe.metrics.follow import watch_file

    out = Output(json_mode=json_out)
    with reported_errors(out):
        argv = shlex.split(exec_cmd) if exec_cmd else None
        if exec_cmd is not None and not argv:
            raise UsageError("--exec: empty command")
        if interval <= 0:
            raise UsageError("--interval must be positive")
        remote_target = target_or_path if path is not None else None
        log = Path(path if path is not None else target_or_path)
        if remote_target is None and log.is_dir():
            raise UsageError(f"{log}: is a directory", hint="watch one log file")

        def on_finding(f: Finding) -> None:
            if json_out:
                sys.stdout.write(json.dumps({"type": "finding", **f.to_json()}, allow_nan=False) + "\n")
                sys.stdout.flush()
            else:
                out.console.print(
                    f"[{_STYLE[f.severity]}]{f.severity}[/] {escape(f.run)} {escape(f.metric)} step "
                    f"{fmt_step(f.step)}: {escape(f.message)}\n  [dim]→ {escape(f.suggestion)}[/]"
                )
            if argv:
                try:
                    run_exec(argv, f)
                except OSError as exc:
                    out.error(f"--exec {argv[0]}: {exc.strerror or exc}")

        def stop_on_term(_sig: int, _frame: FrameType | None) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop_on_term)
        where = f"{log} on {remote_target}" if remote_target else str(log)
        if remote_target is not None:
            from trainprobe.remote import parse_target

            parse_target(remote_target)  # a malformed target is a usage error before anything starts
        if not json_out:
            out.note(f"watching {where} (Ctrl-C for the summary)")
        options = Options(threshold=threshold, event_patterns=list(event))
        if remote_target is not None:
            from trainprobe.metrics.remote_follow import watch_remote

            report = watch_remote(
                remote_target, str(log), on_finding, options=options, interval=interval, notify=out.note
            )
        else:
            report = watch_file(log, on_finding, options=options, interval=interval)
        if report is None:
            out.note(f"{log}: no metric rows arrived")
            return
        if json_out:
            sys.stdout.write(json.dumps({"type": "summary", **report.to_json()}, allow_nan=False) + "\n")
        else:
            out.console.rule("summary")
            render_report(report, out.console)
    code = exit_code_for(report, fail_on.value)
    if code:
        raise typer.Exit(code)
