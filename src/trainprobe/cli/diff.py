"""`trainprobe diff`: what changed between two checkpoints, tensor by tensor."""

from __future__ import annotations

from typing import Any

from trainprobe.cli._command import Command, CommandParser, add_output_options, at_least
from trainprobe.cli._output import Console, Output, Table, escape

_DIFF_HELP = (
    "Per tensor: identical, changed (relative change ||A-B||/||A|| and max |A-B|), added, removed, shape or "
    "dtype changed; a summary per module. For two checkpoints of one run: parameters that did not move at "
    "all, and parameters whose optimizer step counter moved while their weights did not (or the reverse) — "
    "what a save that mixed model and optimizer from different steps leaves behind. Both files are streamed "
    "in chunks."
)

_DIFF_EPILOG = (
    "examples:\n"
    "  trainprobe diff ckpt/step-00000100.pt ckpt/step-00000200.pt\n"
    "  trainprobe diff a.pt b.pt --all        list identical tensors too\n"
    "  trainprobe diff a.pt b.pt --json       the JSON report (schema_version 1)\n\n"
    "Exit codes: 0 compared; 1 the optimizer's steps and the weights disagree about what moved; 2 a "
    "checkpoint is unreadable, or a usage error."
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


def render_diff_report(console: Console, report: dict[str, Any], show_all: bool, limit: int) -> None:
    console.print(f"[bold]A[/] {escape(report['a'])}\n[bold]B[/] {escape(report['b'])}")
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
    console.print(f"{sum(report['summary'].values())} tensor(s): {summary}")


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("a", metavar="A", help="The reference checkpoint.")
    parser.add_argument("b", metavar="B", help="The checkpoint compared with A.")
    options = parser.add_argument_group("options")
    options.add_argument("--all", dest="show_all", action="store_true", help="List identical tensors too.")
    options.add_argument(
        "--limit", type=at_least(1), default=50, metavar="N",
        help="Most tensors to list, largest changes first (default: %(default)s).",
    )  # fmt: skip
    add_output_options(options)


def diff(a: str, b: str, *, json_mode: bool, show_all: bool, limit: int, quiet: bool) -> int:
    from trainprobe.checkpoint.diff import diff_paths

    out = Output(json_mode=json_mode, quiet=quiet)
    report = diff_paths(a, b).to_json()
    out.result(report, lambda console: render_diff_report(console, report, show_all, limit))
    return int(report["exit_code"])


COMMAND = Command(_DIFF_HELP, "A B [options]", add_arguments, diff, _DIFF_EPILOG)
