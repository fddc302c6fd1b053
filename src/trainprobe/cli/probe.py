"""`trainprobe probe`: what is on a target."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._fleet import (
    CONFIG_HELP,
    FLEET_HELP,
    PARALLEL_HELP,
    TARGET_HELP,
    expand_specs,
    is_fleet,
    live_reporter,
    render_fleet,
)
from trainprobe.cli._output import Output
from trainprobe.cli.app import app

if TYPE_CHECKING:
    from rich.console import Console

PROBE_HELP = (
    "Show what is on TARGET: Python interpreters (versions; numpy, torch and CUDA), GPUs (nvidia-smi), disk "
    "free, load and memory, and running Python processes (training ones flagged).\n\n"
    f"{TARGET_HELP}\n\n{FLEET_HELP}\n\n"
    "\b\nExamples:\n"
    "  trainprobe probe ssh=root@10.1.2.6\n"
    "  trainprobe probe 'ssh=node[01-16]' ssh=login1 --no-cuda   a fleet: a report and a table row each\n"
    "  trainprobe probe 'ssh=bastion//ssh=gpu07' --json\n"
    "  trainprobe probe ssh=gpu07 --no-cuda        skip importing torch to ask about CUDA (faster)\n\n"
    "Exit codes: 0 probed (every target); 1 a target could not be reached or probed; 2 a bad target, name "
    "or flag."
)


def _gib(n: float | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def render_probe(console: Console, report: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    memory = report.get("memory", {})
    load = " ".join(f"{x:.2f}" for x in report.get("load", []))
    console.print(
        f"[bold]{escape(report['target'])}[/]  host {escape(str(report.get('host')))}  user "
        f"{escape(str(report.get('user')))}  load {load}  cpus {report.get('cpus')}  memory "
        f"{_gib(memory.get('memavailable_bytes'))} free of {_gib(memory.get('memtotal_bytes'))}"
    )
    table = Table(
        "interpreter", "version", "numpy", "torch", "cuda", title="Python interpreters (discovery order)"
    )
    for entry in report.get("interpreters", []):
        cuda = entry.get("cuda")
        table.add_row(
            escape(entry["python"]),
            entry.get("version") or f"[red]{escape(entry.get('error', '?'))}[/]",
            entry.get("numpy") or "[dim]—[/]",
            entry.get("torch") or "[dim]—[/]",
            "[dim]—[/]" if cuda is None else ("yes" + f" ({entry.get('cuda_devices')})" if cuda else "no"),
        )
    console.print(table)
    gpus = report.get("gpus")
    if gpus is None:
        console.print("GPUs: [dim]no nvidia-smi[/]")
    else:
        table = Table("gpu", "name", "memory used", "utilisation", title="GPUs")
        for gpu in gpus:
            used = f"{gpu['memory_used_mib']} / {gpu['memory_total_mib']} MiB"
            table.add_row(gpu["index"], escape(gpu["name"]), used, f"{gpu['utilization_pct']} %")
        console.print(table)
    for disk in report.get("disks", []):
        console.print(
            f"disk {escape(disk['path'])}: {_gib(disk['free_bytes'])} free of {_gib(disk['total_bytes'])}"
        )
    processes = report.get("processes", [])
    if processes:
        table = Table("pid", "training", "python", "command line", title="running Python processes")
        for proc in processes:
            table.add_row(str(proc["pid"]), "yes" if proc["training"] else "", escape(proc["python"]),
                          escape(proc["cmdline"][:120]))  # fmt: skip
        console.print(table)
    else:
        console.print("running Python processes: [dim]none visible[/]")


def _probe_summary(report: dict[str, Any]) -> str:
    gpus = report.get("gpus")
    load = report.get("load") or [0.0]
    return (
        f"{report.get('host')} · {len(report.get('interpreters', []))} Python(s) · "
        f"{'no nvidia-smi' if gpus is None else f'{len(gpus)} GPU(s)'} · load {load[0]:.2f}"
    )


def _probe_fleet(
    out: Output, targets: list[str], *, cuda: bool, timeout: float, connect_timeout: float, parallel: int
) -> int:
    from trainprobe.remote.probe import probe_fleet

    _, _, on_done = live_reporter(targets, None, None if out.quiet or out.json_mode else sys.stderr.buffer)
    fleet = probe_fleet(
        targets,
        cuda=cuda,
        parallel=parallel,
        timeout=timeout,
        connect_timeout=connect_timeout,
        on_done=on_done,
    )
    reports = {o.target: o.result for o in fleet.outcomes if o.ok and isinstance(o.result, dict)}

    def render(console: Console) -> None:
        for report in reports.values():
            render_probe(console, report)
            console.print()
        summaries = {target: _probe_summary(report) for target, report in reports.items()}
        render_fleet(console, fleet, summaries, title="probed")

    out.result(fleet.to_json(), render)
    return fleet.exit_code


@app.command("probe", help=PROBE_HELP, no_args_is_help=True)
def probe_command(
    targets: list[str] = typer.Argument(
        ...,
        metavar="TARGET",
        help="Where to look, e.g. ssh=user@host; several (a range, a group): a fleet.",
    ),
    cuda: bool = typer.Option(
        True, "--cuda/--no-cuda", help="Import torch in each interpreter to ask about CUDA."
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", help="Seconds before the probe is killed (each target)."
    ),
    connect_timeout: float = typer.Option(10.0, "--connect-timeout", help="Seconds to connect and log in."),
    parallel: int = typer.Option(32, "--parallel", min=1, help=PARALLEL_HELP),
    config: Path | None = typer.Option(None, "--config", metavar="FILE", help=CONFIG_HELP),
    json_mode: bool = typer.Option(False, "--json", help="Print the report as one JSON document."),
) -> None:
    out = Output(json_mode=json_mode)
    with reported_errors(out):
        expanded = expand_specs(targets, config)
        if is_fleet(expanded):
            code = _probe_fleet(
                out, expanded, cuda=cuda, timeout=timeout, connect_timeout=connect_timeout, parallel=parallel
            )
        else:
            from trainprobe.remote.probe import probe

            report = probe(expanded[0], cuda=cuda, timeout=timeout, connect_timeout=connect_timeout)
            out.result(report, lambda console: render_probe(console, report))
            code = 0
    raise typer.Exit(code)
