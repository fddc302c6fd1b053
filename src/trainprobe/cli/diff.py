"""`trainprobe diff`: what changed between two checkpoints, tensor by tensor (here, on a target, a fleet)."""

from __future__ import annotations

from typing import Any

from trainprobe.cli._command import Command, CommandParser, at_least
from trainprobe.cli._fleet import show_report
from trainprobe.cli._output import Console, Output
from trainprobe.cli._plain import Table, escape
from trainprobe.cli._verdicts import EXIT_CODES, FLEET_EXIT_CODES, MARK
from trainprobe.cli._where import Remote, Where

_DIFF_HELP = (
    "A and B are checkpoint units of any kind (a file, checkpoint-N/, global_stepN/, a DCP directory: "
    "chunked tensors are compared whole). Per tensor: identical, changed (relative change ||A-B||/||A|| and "
    "max |A-B| over the elements finite in both; NaN/Inf counted, never subtracted), added, removed, shape "
    "or dtype changed; a summary per module. For two checkpoints of one run: parameters that did not move at "
    "all, and parameters whose optimizer step counter moved while their weights did not (or the reverse) — "
    "what a save that mixed model and optimizer from different steps leaves behind; low-precision weights "
    "whose updates fell below the dtype's resolution are a note. Each unit is also judged as check judges it "
    "(NaN/Inf, a suspicious global, damage, a torn snapshot), so diff's verdict for a unit is check's. Both "
    "are streamed in chunks.\n\n"
    "--on compares the two where they are (ssh=host//docker=trainer, see trainprobe run --help): A and B are "
    "paths there, only trainprobe's readers and numpy are needed there, and nothing is copied back but the "
    "report. Repeat --on, or give a range (ssh=node[01-08]), a name or group from the targets file, or "
    "slurm=JOBID, to compare the same two paths on each target of a fleet."
)

_DIFF_EPILOG = (
    "examples:\n"
    "  trainprobe diff ckpt/step-00000100.pt ckpt/step-00000200.pt\n"
    "  trainprobe diff out/checkpoint-500 out/checkpoint-1000   two HF Trainer units\n"
    "  trainprobe diff a.pt b.pt --all        list identical tensors too\n"
    "  trainprobe diff a.pt b.pt --json       the JSON report (schema_version 3)\n"
    "  trainprobe diff /ckpt/step_1000 /ckpt/step_2000 --on ssh=user@gpu07   where the files are\n"
    "  trainprobe diff /local/ckpt/a.pt /local/ckpt/b.pt --on 'ssh=node[01-08]'   on each node\n\n"
    f"{EXIT_CODES}\n\n"
    "diff adds torn: the optimizer's steps and the weights disagree about what moved. A unit that cannot "
    f"be opened is reported (corrupt or unreadable), never a traceback. {FLEET_EXIT_CODES}"
)

_STYLE = {
    "changed": "",
    "identical": "dim",
    "added": "green",
    "removed": "red",
    "shape-changed": "yellow",
    "dtype-changed": "yellow",
}


def _num(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.3g}"


def _order(x: Any) -> float:
    """A rel change as a sort key: numbers as they are, "nan"/"inf" (as JSON carries them) first."""
    if isinstance(x, (int, float)):
        return float(x)
    return float("inf") if x in ("inf", "nan") else 0.0


def _render_unit(console: Console, side: str, unit: dict[str, Any] | None, path: str) -> None:
    if unit is None:
        console.print(f"[bold]{side}[/] {escape(path)}")
        return
    step = f" · step {unit['step']} ({unit['step_source']})" if unit.get("step") is not None else ""
    console.print(
        f"[bold]{side}[/] {MARK.get(unit['verdict'], unit['verdict'])}  {escape(path)}  "
        f"[dim]{unit['framework']}{step}[/]",
        soft_wrap=True,
    )
    for err in unit.get("errors", []):
        console.print(f"    [bold red]{escape(err['file'])}: {escape(err['error'])}[/]", soft_wrap=True)
    if unit.get("problem"):
        console.print(f"    [yellow]{escape(unit['problem'])}[/]")
    for bad in unit.get("nonfinite", [])[:10]:
        name = bad["name"] + (f" ({bad['param_name']})" if bad.get("param_name") else "")
        console.print(
            f"    [red]{escape(name)}: NaN {bad['nan']} · +Inf {bad['posinf']} · −Inf {bad['neginf']}[/]",
            soft_wrap=True,
        )
    for e in unit.get("evidence", []):
        word, style = ("FAIL", "bold red") if e["outcome"] == "fail" else ("note", "dim")
        where = f"{escape(e['file'])}: " if e.get("file") else ""
        console.print(f"    [{style}]{word} {e['check']}[/] {where}{escape(e['message'])}", soft_wrap=True)


def render_diff_report(console: Console, report: dict[str, Any], show_all: bool, limit: int) -> None:
    units = report.get("units", {})
    _render_unit(console, "A", units.get("a"), report["a"])
    _render_unit(console, "B", units.get("b"), report["b"])
    for side, why in report.get("not_compared", {}).items():
        console.print(f"[bold red]{side.upper()} could not be compared:[/] {escape(why)}", soft_wrap=True)
    steps = report["optimizer_steps"]
    if steps["a"] is not None:
        console.print(f"optimizer step {_num(steps['a'])} -> {_num(steps['b'])}")
    rows = [t for t in report["tensors"] if show_all or t["status"] != "identical"]
    rows.sort(key=lambda t: (t["status"] != "changed", -_order(t.get("rel_change"))))
    if rows:
        table = Table(show_edge=False, box=None, padding=(0, 1), pad_edge=False)
        # Numbers and types keep their width; a long tensor name folds instead.
        widths = {"status": 9, "dtype": 8, "shape": 6, "rel change": 10, "max |A-B|": 9}
        for col in ("tensor", "status", "dtype", "shape", "rel change", "max |A-B|"):
            table.add_column(
                col,
                justify="right" if col in ("rel change", "max |A-B|") else "left",
                min_width=widths.get(col),
                overflow="fold",
            )
        for t in rows[:limit]:
            shape = str(t["shape"]) + (f" -> {t['shape_b']}" if "shape_b" in t else "")
            dtype = t["dtype"] + (f" -> {t['dtype_b']}" if "dtype_b" in t else "")
            name = t["name"] + (f" ({t['param_name']})" if t.get("param_name") else "")
            table.add_row(
                escape(name),
                t["status"],
                dtype,
                shape,
                _num(t.get("rel_change")),
                _num(t.get("max_abs_diff")),
                style=_STYLE.get(t["status"], ""),
            )
        console.print(table)
        if len(rows) > limit:
            console.print(f"[dim]… {len(rows) - limit} more (--limit, or --json for all)[/]")
    modules = report["top_modules"]
    if len(modules) > 1:
        table = Table(title="by module", show_edge=False, box=None, padding=(0, 1), pad_edge=False)
        for col in ("module", "tensors", "changed", "identical", "other", "rel change"):
            table.add_column(col, justify="left" if col == "module" else "right")
        for m in modules:
            table.add_row(
                escape(m["prefix"]),
                str(m["tensors"]),
                str(m["changed"]),
                str(m["identical"]),
                str(m["added_removed_or_reshaped"]),
                _num(m["rel_change"]),
            )
        console.print(table)
    same = report["same_run"]
    if same["frozen_count"]:
        console.print(
            f"[yellow]{same['frozen_count']} parameter(s) did not move at all[/], e.g. "
            + ", ".join(escape(n) for n in same["frozen_parameters"][:5])
        )
    for line in same["step_moved_weights_did_not"][:10]:
        console.print(f"[bold red]optimizer stepped, weights identical:[/] {escape(line)}", soft_wrap=True)
    for line in same["weights_moved_step_did_not"][:10]:
        console.print(f"[bold red]weights moved, optimizer step did not:[/] {escape(line)}", soft_wrap=True)
    for line in same.get("below_resolution", [])[:5]:
        console.print(f"[dim]note: {escape(line)}[/]", soft_wrap=True)
    for note in report.get("notes", []):
        style = "bold red" if note["kind"] == "suspicious-global" else "dim"
        console.print(f"[{style}]{escape(note['message'])}[/]", soft_wrap=True)
    changed_nonfinite = [t for t in report["tensors"] if t.get("nonfinite_a", 0) != t.get("nonfinite_b", 0)]
    for t in changed_nonfinite[:10]:
        console.print(
            f"[red]{escape(t['name'])}: {t['nonfinite_a']} NaN/Inf in A, {t['nonfinite_b']} in B[/]",
            soft_wrap=True,
        )
    summary = ", ".join(f"{n} {status}" for status, n in report["summary"].items())
    verdict = report["verdict"]
    console.print(
        f"{sum(report['summary'].values())} tensor(s): {summary or 'none compared'} — "
        f"{MARK.get(verdict, verdict)}"
    )


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("a", metavar="A", help="The reference checkpoint.")
    parser.add_argument("b", metavar="B", help="The checkpoint compared with A.")
    options = parser.add_argument_group("options")
    options.add_argument("--all", dest="show_all", action="store_true", help="List identical tensors too.")
    options.add_argument(
        "--limit", type=at_least(1), default=50, metavar="N",
        help="Most tensors to list, largest changes first (default: %(default)s).",
    )  # fmt: skip


_REMOTE = Remote(
    "fleet", "Compare on a remote target (ssh=user@host...).", "the remote diff", task="diff:diff"
)


def diff(a: str, b: str, *, show_all: bool, limit: int, out: Output, where: Where) -> int:
    def render(console: Console, report: dict[str, Any]) -> None:
        render_diff_report(console, report, show_all, limit)

    def here() -> dict[str, Any]:
        from trainprobe.checkpoint.diff import diff_paths

        return diff_paths(a, b).to_json()

    return show_report(
        out, where, a, b, here=here, render=render, summarise=_diff_summary, title="compared"
    )  # fmt: skip


def _diff_summary(report: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in report["summary"].items())
    return f"{counts} — {report['verdict']}"


COMMAND = Command(
    _DIFF_HELP, "A B [options]", add_arguments, diff, _DIFF_EPILOG, remote=_REMOTE, schema_version=3
)
