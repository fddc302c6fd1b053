"""`trainprobe probe`: what is on a target."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.cli.run import TARGET_HELP

if TYPE_CHECKING:
    from rich.console import Console

PROBE_HELP = (
    "Show what is on TARGET: Python interpreters (versions; numpy, torch and CUDA), GPUs (nvidia-smi), disk "
    "free, load and memory, and running Python processes (training ones flagged).\n\n"
    f"{TARGET_HELP}\n\n"
    "\b\nExamples:\n"
    "  trainprobe probe ssh=root@10.1.2.6\n"
    "  trainprobe probe 'ssh=bastion//ssh=gpu07' --json\n"
    "  trainprobe probe ssh=gpu07 --no-cuda        skip importing torch to ask about CUDA (faster)\n\n"
    "Exit codes: 0 probed; 1 the target could not be reached or probed; 2 a bad target or flag."
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


@app.command("probe", help=PROBE_HELP, no_args_is_help=True)
def probe_command(
    target: str = typer.Argument(..., metavar="TARGET", help="Where to look, e.g. ssh=user@host."),
    cuda: bool = typer.Option(
        True, "--cuda/--no-cuda", help="Import torch in each interpreter to ask about CUDA."
    ),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds before the probe is killed."),
    connect_timeout: float = typer.Option(10.0, "--connect-timeout", help="Seconds to connect and log in."),
    json_mode: bool = typer.Option(False, "--json", help="Print the report as one JSON document."),
) -> None:
    from trainprobe.remote.probe import probe

    out = Output(json_mode=json_mode)
    with reported_errors(out):
        report = probe(target, cuda=cuda, timeout=timeout, connect_timeout=connect_timeout)
        out.result(report, lambda console: render_probe(console, report))
