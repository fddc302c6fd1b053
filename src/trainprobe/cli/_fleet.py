"""What every command that takes a fleet shares (run, probe, and scan, check, diff and logs with --on): the
target help and options, expanding specs, live output prefixed by target, one report per target and the
per-target table (:func:`show_fleet`). Library imports stay inside the functions (fast start); the hop
registry, which the target help is built from, is two small modules."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from trainprobe.cli._output import Console, LiveOutput, Output
from trainprobe.cli._plain import Table, escape
from trainprobe.cli._where import Where, is_fleet
from trainprobe.json_names import i_json
from trainprobe.remote.hops import kinds_help  # the registry alone: no hop module, not the engine

if TYPE_CHECKING:
    from trainprobe.remote.fleet_result import FleetResult, Outcome
    from trainprobe.remote.target import Target
    from trainprobe.tasks import FleetReports

R = TypeVar("R")


def _target_help() -> str:
    """The target syntax: one line per hop kind, from the hop registry
    (:func:`trainprobe.remote.hops.kinds_help`, which imports no hop module and not the engine)."""
    rows = "".join(f"  {usage:<34}{meaning}\n" for usage, meaning in kinds_help())
    return (
        f"TARGET is one string of //-separated hops, outermost first:\n{rows}"
        f"  {'ssh=bastion//ssh=gpu07':<34}ssh hops in a row: through a jump host (ProxyJump)\n\n"
        "Without python=/venv=/conda=, the far side picks the first of: $VIRTUAL_ENV, $CONDA_PREFIX, venvs "
        "under home directories, /root and /opt, conda envs, interpreters of running Python processes, "
        "python3/python on PATH; --need picks the first of those that has the modules."
    )


TARGET_HELP = _target_help()

FLEET_HELP = (
    "A fleet (many targets at once): several targets (as the usage shows), and/or\n"
    "  ssh=node[01-16]//docker=trainer   host ranges ([1-3,7]; a leading zero pads)\n"
    "  trainers                          a name or group from the targets file (--config)\n"
    "  ssh=login1//slurm=812345          every node of a running Slurm job\n\n"
    "Targets run at most --parallel at once, output lines are prefixed by target, and a table per "
    "target (status, exit code, duration, summary) ends the run. The targets file is --config, else "
    "$TRAINPROBE_CONFIG, else $XDG_CONFIG_HOME/trainprobe/targets.toml (~/.config/trainprobe/targets.toml)."
)

_STATUS_STYLE = {"ok": "green", "failed": "red", "exception": "red", "timeout": "yellow", "killed": "yellow"}


def live_reporter(
    targets: Sequence[str], stdout: LiveOutput | None, stderr: LiveOutput | None
) -> tuple[Callable[[str, str, bytes], None] | None, Callable[[list[str]], None], Callable[[Outcome], None]]:
    """(on_output, on_plan, on_done) for a fleet: output lines prefixed by target; a line as each target ends.

    Every write is one whole line, so lines of different targets never mix. The streams never raise (a
    :class:`LiveOutput` keeps its failure for the command to raise after the fleet).
    """
    from trainprobe.remote.live_output import LinePrefixer

    streams = {"stdout": stdout, "stderr": stderr}
    lock = threading.Lock()

    def emit(stream: str, line: bytes) -> None:
        sink = streams[stream]
        if sink is not None:
            with lock:
                sink.write(line)
                sink.flush()

    prefixer = LinePrefixer(targets, emit)

    def done(outcome: Outcome) -> None:
        prefixer.flush(outcome.target)
        if stderr is None:
            return
        mark = "✓" if outcome.ok else "✗"
        line = f"{mark} {outcome.target} {outcome.status} ({outcome.duration:.1f} s)"
        if not outcome.ok and outcome.summary:
            line += f": {outcome.summary}"
        with lock:
            stderr.write(line.encode("utf-8", "replace") + b"\n")
            stderr.flush()

    on_output = prefixer.write if stdout is not None or stderr is not None else None
    return on_output, prefixer.set_targets, done


def render_fleet(
    console: Console, fleet: FleetResult, summaries: dict[str, str] | None = None, title: str = "targets"
) -> None:
    """The per-target table, the summary line and where the logs are. ``summaries`` overrides the summary
    column for some targets (``probe`` shows host, interpreters and GPUs instead of the raw result)."""
    table = Table("target", "status", "exit", "duration", "summary", title=title)
    for outcome in fleet.outcomes:
        style = _STATUS_STYLE.get(outcome.status, "bold red")
        summary = (summaries or {}).get(outcome.target, outcome.summary)
        table.add_row(
            escape(outcome.target),
            f"[{style}]{outcome.status}[/]",
            str(outcome.exit_code),
            f"{outcome.duration:.1f} s",
            escape(summary),
        )
    console.print(table)  # piped: whole rows, one line each, for grep and people's scripts
    console.print(fleet.summary_line())
    console.print(f"logs: {fleet.log_dir}", soft_wrap=True, markup=False, highlight=False)


def show_fleet(
    out: Output,
    targets: Sequence[Target],
    run: Callable[[Callable[[Outcome], None], threading.Event], FleetReports[R]],
    render_one: Callable[[Console, R], None],
    summarise_one: Callable[[R], str],
    *,
    title: str,
    code_of: Callable[[R], int] | None = None,
    result: Callable[[R], Any] | None = None,
    names_as_i_json: bool = True,
    headed: bool = True,
) -> int:
    """A fleet's command end to end: ``run(on_done, cancel)`` (a ✓/✗ line on stderr as each target ends;
    ``cancel`` is set when that stream fails), then one report per target (headed ``── TARGET`` unless
    ``headed`` is off: the report names its target), the table of targets, and the fleet document under
    ``--json`` (:meth:`~trainprobe.tasks.FleetReports.to_json`; ``result``: each report's JSON, default its
    ``to_json()``). Returns the fleet's exit code (:meth:`~trainprobe.tasks.FleetReports.exit_code_by`,
    each report's code from ``code_of``, default its own ``exit_code``)."""
    cancel = threading.Event()
    progress = None if out.quiet or out.json_mode else out.live(cancel, stderr=True)
    _, _, on_done = live_reporter([str(t) for t in targets], None, progress)
    fleet = run(on_done, cancel)
    if progress is not None:
        progress.raise_failure()
    code = fleet.exit_code if code_of is None else fleet.exit_code_by(code_of)
    summaries = {target: summarise_one(report) for target, report in fleet.reports.items()}

    def render(console: Console) -> None:
        for target, report in fleet.reports.items():
            if headed:
                console.print(f"[bold]── {escape(target)}[/]", soft_wrap=True)  # whole: people copy it
            render_one(console, report)
            console.print()
        render_fleet(console, fleet.fleet, summaries, title=title)

    data = fleet.to_json(exit_code=code, result=result)
    if names_as_i_json:
        from trainprobe.json_names import i_json

        data = i_json(data)
    out.result(data, render)
    return code


def show_report(
    out: Output,
    where: Where,
    *args: Any,
    here: Callable[[], R],
    render: Callable[[Console, R], None],
    summarise: Callable[[R], str],
    title: str,
    code_of: Callable[[R], int] | None = None,
    result: Callable[[R], Any] | None = None,
    names_as_i_json: bool = True,
    **options: Any,
) -> int:
    """The one shape of a command that makes a report: ``here()`` without --on; with it, the command's task
    (:meth:`~trainprobe.cli._where.Where.task_on`) with ``args`` and ``options`` on one target, or over a
    fleet (:func:`show_fleet`). One renderer per report, the fleet's rule for the exit code, ``code_of`` (the
    report's ``exit_code`` unless given) for one report, ``result`` its JSON (its ``to_json()`` unless
    given)."""
    if where.on:
        where.task_function("on")  # an installation without the remote engine says so before targets are read
        targets = where.targets()
        if is_fleet(targets):
            return show_fleet(
                out, targets,
                lambda on_done, _cancel: where.task_on_fleet(targets, *args, on_done=on_done, **options),
                render, summarise, title=title, code_of=code_of, result=result,
                names_as_i_json=names_as_i_json,
            )  # fmt: skip
        report: R = where.task_on(targets[0], *args, **options)
    else:
        report = here()
    data = (result or _document)(report)
    out.result(i_json(data) if names_as_i_json else data, lambda console: render(console, report))
    return (code_of or _exit_code)(report)


def _document(report: Any) -> Any:
    return report if isinstance(report, dict) else report.to_json()


def _exit_code(report: Any) -> int:
    return int(report["exit_code"] if isinstance(report, dict) else report.exit_code)
