"""`trainprobe watch`: follow a growing training log (here or on a target), print findings as they appear."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from trainprobe.cli._command import Command, CommandParser, seconds
from trainprobe.cli._detectors import SEVERITY_STYLE, add_detector_options, add_fail_on
from trainprobe.cli._output import Output
from trainprobe.cli._where import Remote, Where
from trainprobe.cli.logs import render_report
from trainprobe.errors import UsageError

if TYPE_CHECKING:  # imported where used: trainprobe.metrics pulls in numpy, which every command would pay for
    from collections.abc import Callable

    from trainprobe.metrics import Finding

_WATCH_HELP = (
    "Follows the log like `tail -F` (across rotation), runs the detectors as lines arrive and prints each "
    "new finding as it appears. Ctrl-C (or SIGTERM) stops and prints the summary report.\n\n"
    "With --on TARGET the file is followed on that machine (through the remote engine: ssh, containers, ..., "
    "the target syntax of trainprobe run --help; only Python is needed there) and the detectors run here; a "
    "dropped link reconnects and resumes at the last byte received, so no line is lost or repeated. One "
    "target: a fleet's logs are many streams (run one watch per target, or `trainprobe logs --on` for a "
    "fleet's report). `watch TARGET PATH` (the target first) is the same as `watch --on TARGET PATH`."
)

_WATCH_EPILOG = (
    "examples:\n"
    "  trainprobe watch train.log\n"
    "  trainprobe watch /scratch/run3/train.log --on ssh=gpu07\n"
    "  trainprobe watch /root/run/train.log --on ssh=root@10.1.2.6//pct=200   inside a Proxmox CT\n"
    "  trainprobe watch /scratch/run3/train.log --on trainer1   a name from the targets file\n"
    "  trainprobe watch train.log --exec 'notify-send trainprobe'\n"
    "  trainprobe watch train.log --json | jq .\n\n"
    "Exit codes: 0 nothing at --fail-on or worse, 1 findings (or the target stayed unreachable), 2 bad flags."
)


def finding_env(f: Finding) -> dict[str, str]:
    """What ``--exec`` gets: the finding in environment variables (and as JSON on stdin)."""
    from trainprobe.conventions import step_text

    got = {
        "TRAINPROBE_FINDING_KIND": f.kind,
        "TRAINPROBE_FINDING_SEVERITY": f.severity,
        "TRAINPROBE_FINDING_RUN": f.run,
        "TRAINPROBE_FINDING_METRIC": f.metric,
        "TRAINPROBE_FINDING_STEP": step_text(f.step),
        "TRAINPROBE_FINDING_MESSAGE": f.message,
        "TRAINPROBE_FINDING_SUGGESTION": f.suggestion,
    }
    return {k: env_text(v) for k, v in got.items()}


def env_text(text: str) -> str:
    """``text`` as an environment value can hold it: a NUL (which ends a C string) and what UTF-8 cannot
    encode (a lone surrogate from a JSON key) written as backslash escapes, ``\\x00`` and ``\\ud800``."""
    return text.replace("\0", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def run_exec(argv: list[str], f: Finding) -> int:
    """Run the ``--exec`` command as an argv list, never through a shell: finding text cannot inject
    anything."""
    env = {**os.environ, **finding_env(f)}
    proc = subprocess.run(argv, input=json.dumps(f.to_json()).encode(), env=env, check=False)
    return proc.returncode


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "target_or_path", metavar="PATH",
        help="The log to follow; with --on, a path there (`watch TARGET PATH` works too).",
    )  # fmt: skip
    parser.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    options = parser.add_argument_group("options")
    options.add_argument(
        "--exec", dest="exec_cmd", metavar="CMD",
        help="Run this command for each new finding (argv split like a shell, run without one); the finding "
        "is in TRAINPROBE_FINDING_* variables and as JSON on stdin.",
    )  # fmt: skip
    options.add_argument(
        "--interval", type=seconds, default=1.0, metavar="SECONDS",
        help="Seconds between polls of the file (default: %(default)g).",
    )  # fmt: skip
    add_fail_on(options, when=" at the end")
    add_detector_options(options, stall="none")


def watch(
    target_or_path: str,
    path: str | None,
    *,
    exec_cmd: str | None,
    interval: float,
    fail_on: str,
    event: list[str],
    threshold: float,
    out: Output,
    where: Where,
) -> int:
    try:
        argv = shlex.split(exec_cmd) if exec_cmd else None
    except ValueError as exc:
        raise UsageError(f"--exec: {exc}") from None
    if exec_cmd is not None and not argv:
        raise UsageError("--exec: empty command")
    if where.on and path is not None:
        raise UsageError(
            f"two targets: --on {where.on[0]} and {target_or_path}",
            hint="give --on TARGET PATH (the path alone)",
        )
    specs = where.on or ([target_or_path] if path is not None else [])
    log = Path(path if path is not None else target_or_path)
    remote_target = (
        where.one(
            refusal="watch follows one log on one target", specs=specs,
            hint="run one watch per target (slurm=JOB@NODE), or `trainprobe logs --on` for a fleet's report",
        )
        if specs
        else None
    )  # fmt: skip
    if remote_target is None and log.is_dir():
        raise UsageError(f"{log}: is a directory", hint="watch one log file")

    from trainprobe.metrics import Options
    from trainprobe.metrics.follow import watch_file

    on_finding = _finding_sink(out, argv)

    def stop_on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    if not out.json_mode:
        shown = f"{log} on {remote_target}" if remote_target else str(log)
        out.note(f"watching {shown} (Ctrl-C for the summary)")
    options = Options(threshold=threshold, event_patterns=list(event))
    if remote_target is not None:
        from trainprobe.tasks import watch_on

        report = watch_on(
            remote_target, str(log), on_finding, options=options, interval=interval, notify=out.note,
            connect_timeout=where.connect_timeout,
        )  # fmt: skip
    else:
        report = watch_file(log, on_finding, options=options, interval=interval)
    if report is None:
        out.note(f"{log}: no metric rows arrived")
        return 0
    if out.json_mode:
        out.json({"type": "summary", **report.to_json(fail_on=fail_on)}, indent=None)
    elif not out.quiet:
        out.console.rule("summary")
        render_report(report, out.console)
    return report.exit_code_for(fail_on)


def _finding_sink(out: Output, argv: list[str] | None) -> Callable[[Finding], None]:
    """What ``watch`` does with each new finding: one line (a JSON line under --json, nothing under -q), then
    the ``--exec`` command if there is one."""
    from trainprobe.cli._plain import escape
    from trainprobe.conventions import step_text

    def on_finding(f: Finding) -> None:
        if out.json_mode:
            out.json({"type": "finding", **f.to_json()}, indent=None)
        elif not out.quiet:
            out.console.print(
                f"[{SEVERITY_STYLE[f.severity]}]{f.severity}[/] {escape(f.run)} {escape(f.metric)} step "
                f"{step_text(f.step)}: {escape(f.message)}\n  [dim]→ {escape(f.suggestion)}[/]"
            )
        if argv:
            try:
                run_exec(argv, f)
            except OSError as exc:
                out.error(f"--exec {argv[0]}: {exc.strerror or exc}")

    return on_finding


COMMAND = Command(
    _WATCH_HELP, "PATH [--on TARGET] [options]", add_arguments, watch, _WATCH_EPILOG,
    remote=Remote(
        "one", "Follow the log on a remote target (ssh=user@host//venv=..., a name from the targets file).",
        None,
        heading="where the log is (--on)",
    ),
    json_help="JSON Lines: one object per finding, then the summary (logs --json's document, schema_version "
    "1).",
    quiet_help="Print no findings and no summary; only the exit code tells (--exec still runs).",
)  # fmt: skip
