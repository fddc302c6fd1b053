"""`trainprobe probe`: what is on a target (or on each target of a fleet)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from trainprobe.cli._command import Command, CommandParser
from trainprobe.cli._fleet import FLEET_HELP, TARGET_HELP, show_fleet
from trainprobe.cli._output import Console, Output
from trainprobe.cli._where import Remote, Where, is_fleet

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from trainprobe.remote.fleet_result import Outcome
    from trainprobe.remote.target import Target

PROBE_HELP = (
    "Interpreters with their versions, numpy, torch and CUDA; GPUs (nvidia-smi); disk free, load and "
    "memory; running Python processes, training ones flagged.\n\n"
    f"{TARGET_HELP}\n\n{FLEET_HELP}"
)

PROBE_EPILOG = (
    "examples:\n"
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
    from trainprobe.cli._plain import Table, escape

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


def _probe_fleet(out: Output, targets: list[Target], cuda: bool, where: Where) -> int:
    from trainprobe.remote.probe import probe_fleet
    from trainprobe.tasks import FleetReports

    def run(on_done: Callable[[Outcome], None], cancel: threading.Event) -> FleetReports[dict[str, Any]]:
        fleet = probe_fleet(
            [str(t) for t in targets], cuda=cuda, on_done=on_done, cancel=cancel, **where.fleet_limits()
        )
        return FleetReports(
            fleet, {o.target: o.result for o in fleet.outcomes if o.ok and isinstance(o.result, dict)}
        )

    # a probe report is no verdict: the fleet's code is whether each target was probed
    return show_fleet(
        out, targets, run, render_probe, _probe_summary, title="probed", code_of=lambda _report: 0,
        names_as_i_json=False, headed=False,
    )  # fmt: skip


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "targets", nargs="+", metavar="TARGET",
        help="Where to look, e.g. ssh=user@host; several (a range, a group): a fleet.",
    )  # fmt: skip
    options = parser.add_argument_group("options")
    options.add_argument(
        "--cuda", action=argparse.BooleanOptionalAction, default=True,
        help="Import torch in each interpreter to ask about CUDA.",
    )  # fmt: skip


def probe_command(targets: list[str], *, cuda: bool, out: Output, where: Where) -> int:
    expanded = where.targets(targets)
    if is_fleet(expanded):
        return _probe_fleet(out, expanded, cuda, where)
    from trainprobe.remote.probe import probe

    report = probe(expanded[0], cuda=cuda, **where.limits())
    out.result(report, lambda console: render_probe(console, report))
    return 0


COMMAND = Command(
    PROBE_HELP, "TARGET... [options]", add_arguments, probe_command, PROBE_EPILOG,
    remote=Remote("fleet", "", "the probe", timeout=300.0, heading="where to look", on=False),
    json_help="Print the report as one JSON document (a fleet: the fleet document, each target's report in "
    "its result).",
)  # fmt: skip
