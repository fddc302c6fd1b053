"""`trainprobe scan`: NaN/Inf in checkpoints, here or where the files are (one target or a fleet)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainprobe.cli._command import Command, CommandParser, add_checkpoint_paths, at_least
from trainprobe.cli._fleet import show_report
from trainprobe.cli._output import Console, Output
from trainprobe.cli._sharded import add_sharded_option, sharded_targets, show_sharded
from trainprobe.cli._sizes import human_bytes, short_count
from trainprobe.cli._verdicts import EXIT_CODES, FLEET_EXIT_CODES, MARK
from trainprobe.cli._where import Remote, Where
from trainprobe.plugins import CHECKPOINT_FORMATS, help_list

if TYPE_CHECKING:
    from trainprobe.checkpoint.scanning.report import FileReport, ScanReport, UnitReport

_SCAN_HELP = (
    f"Reads {help_list(CHECKPOINT_FORMATS)}, detected by content. Directories are searched recursively; "
    "quote globs to let trainprobe expand them. Pickle globals other than torch's tensor machinery are "
    "never imported; they are reported as suspicious.\n\n"
    "--on takes a target (ssh=host//docker=trainer, see trainprobe run --help); repeat it, or give a range "
    "(ssh=node[01-16]), a name or group from the targets file, or slurm=JOBID, to scan on a fleet: one "
    "report per target, then a table of the targets."
)

_SCAN_EPILOG = (
    "examples:\n"
    "  trainprobe scan checkpoints/                  every checkpoint under a directory\n"
    "  trainprobe scan 'runs/*/step_*.pt' --stats    with min/max/mean/std/absmax/L2/zero fraction\n"
    "  trainprobe scan model.safetensors --json      the documented JSON report (schema_version 3)\n"
    "  trainprobe scan ckpt.pt --verify              also check zip CRC32s and storage sizes\n"
    "  trainprobe scan /data/ckpt --on ssh=user@gpu01   scan where the files are\n"
    "  trainprobe scan '/ckpt/step_4000/*.distcp' --on 'ssh=node[01-08]'\n"
    "                                                each node's shards, one report each\n"
    "  trainprobe scan --on 'ssh=login//slurm=812345' --sharded /local/ckpt/step_4000\n"
    "                                                one unit, each node its files, one report\n\n"
    f"{EXIT_CODES}\n\n"
    "scan judges no consistency inside a file (that is check); it does report a unit whose step sources "
    "disagree (torn: e.g. an optimizer.pt older than the rest) and a missing rank partition (corrupt). "
    f"{FLEET_EXIT_CODES}"
)


_MAX_BAD = 10  # non-finite tensors listed per file (the JSON has all)
_NOTE_STYLE = {"suspicious-global": "bold red", "pickled-class": "dim", "metadata-nonfinite": "dim"}


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def _render_file(
    console: Console, f: FileReport, stats: bool, indent: str = "", verdict: str | None = None
) -> None:
    """One file; ``verdict``: the headline when the file is a unit of its own (the unit's verdict)."""
    from trainprobe.cli._plain import escape

    verdict = verdict or f.verdict
    head = f"{indent}{MARK.get(verdict, verdict)}  [bold]{escape(f.path)}[/]"
    if f.error is not None:
        console.print(f"{head}  {escape(f.error)}")
    else:
        console.print(
            f"{head}  [dim]{f.format} · {f.role} · {f.tensor_count} tensors · {short_count(f.parameters)} "
            f"params · {human_bytes(f.bytes)} · {f.nonfinite} non-finite · {f.seconds:.2f} s[/]"
        )
    pad = indent + "    "
    classes = [n for n in f.notes if n.kind == "pickled-class"]
    for note in f.notes:
        if note.kind != "pickled-class" or len(classes) == 1:
            console.print(f"{pad}[{_NOTE_STYLE.get(note.kind, 'yellow')}]{escape(note.message)}[/]")
    if len(classes) > 1:  # one line: config classes and enums say the same thing
        names = ", ".join(dict.fromkeys(n.global_name.rsplit(".", 1)[-1] or n.message for n in classes))
        console.print(
            f"{pad}[dim]{len(classes)} pickled classes ({escape(names)}): loading it needs "
            "torch.load(weights_only=False)[/]"
        )
    for problem in f.problems:
        console.print(f"{pad}[yellow]{escape(problem)}[/]")
    for t in f.tensors:
        if t.error:
            console.print(f"{pad}[yellow]{escape(t.display_name)}: {escape(t.error)}[/]")
    bad = f.bad_tensors
    for t in bad[:_MAX_BAD]:
        console.print(
            f"{pad}[red]{escape(t.display_name)}[/]  {t.dtype} {t.shape}  "
            f"[bold red]NaN {t.nan} · +Inf {t.posinf} · −Inf {t.neginf}[/]  first bad at {t.first_bad_index}"
        )
    if len(bad) > _MAX_BAD:
        console.print(
            f"{pad}[red]… {len(bad) - _MAX_BAD} more tensor(s) with NaN/Inf[/] [dim](--json lists all)[/]"
        )
    if stats:
        for t in f.tensors:
            s = t.stats
            console.print(f"{pad}[bold]{escape(t.display_name)}[/]  [dim]{t.dtype} {t.shape}[/]")
            if s is None:
                console.print(f"{pad}    [dim](not a numeric dtype)[/]")
                continue
            zeros = s.get("zero_fraction")
            console.print(
                f"{pad}    min {_fmt(s.get('min'))}  max {_fmt(s.get('max'))}  mean {_fmt(s.get('mean'))}  "
                f"std {_fmt(s.get('std'))}  absmax {_fmt(s.get('absmax'))}  L2 {_fmt(s.get('l2'))}  "
                f"zeros {'—' if zeros is None else f'{zeros:.1%}'}",
                highlight=False,
            )


def _render_unit(console: Console, u: UnitReport, stats: bool) -> None:
    """A single-file unit prints as its file; a directory unit as a headline with its files under it."""
    from trainprobe.cli._plain import escape

    if u.problem is not None or (not u.files and u.unread):
        why = u.problem or "looks like a checkpoint, but no reader claims it: not read"
        console.print(f"{MARK.get(u.verdict, u.verdict)}  [bold]{escape(u.path)}[/]  {escape(why)}")
        return
    single = len(u.files) == 1 and u.files[0].path == u.path and not u.unread
    if single:
        _render_file(console, u.files[0], stats, verdict=u.verdict)
        indent = "    "
    else:
        step = f" · step {u.step} ({u.step_source})" if u.step is not None else ""
        console.print(
            f"{MARK.get(u.verdict, u.verdict)}  [bold]{escape(u.path)}[/]  "
            f"[dim]{u.framework} · {len(u.files)} file(s){step}[/]"
        )
        indent = "    "
        for f in u.files:
            _render_file(console, f, stats, indent)
        for path in u.unread:
            console.print(
                f"{indent}{MARK['unreadable']}  {escape(path)}  no reader claims this file: not read"
            )
    for e in u.evidence:
        if e.outcome in ("fail", "note"):
            where = f"{escape(e.file)}: " if e.file else ""
            style = "bold red" if e.outcome == "fail" else "dim"
            word = "FAIL" if e.outcome == "fail" else "note"
            console.print(f"{indent}[{style}]{word} {e.check}[/] {where}{escape(e.message)}", soft_wrap=True)
    if u.identical_to:
        console.print(f"{indent}[yellow]identical tensors to {escape(', '.join(u.identical_to))}[/]")


def render_scan_report(console: Console, report: ScanReport) -> None:
    """The human form of a scan report (identical for local and remote scans)."""
    from trainprobe.checkpoint.verdict import SUSPICIOUS

    for u in report.units:
        _render_unit(console, u, report.stats)
    t = report.totals()
    summary = (
        f"{t['units']} checkpoint(s), {t['files']} file(s), {t['tensors']} tensors, "
        f"{short_count(t['parameters'])} params, {human_bytes(t['bytes'])} in {t['seconds']:.2f} s: "
    )
    if t["nonfinite"]:
        summary += (
            f"[bold red]{t['nonfinite']} non-finite values in {t['bad_tensors']} tensor(s)[/] "
            f"(NaN {t['nan']}, +Inf {t['posinf']}, −Inf {t['neginf']})"
        )
    else:
        summary += "[green]no NaN or Inf[/]"
    suspicious = sum(u.verdict == SUSPICIOUS for u in report.units)
    if suspicious:
        summary += f", [bold red]{suspicious} with suspicious pickle globals[/]"
    for verdict in ("torn", "corrupt"):
        count = sum(u.verdict == verdict for u in report.units)
        if count:
            summary += f", [bold red]{count} {verdict}[/]"
    if t["units_unreadable"]:
        summary += f", [yellow]{t['units_unreadable']} unreadable[/]"
    console.print(summary)


def _render_merged_scan(console: Console, data: dict[str, Any]) -> None:
    """A sharded scan's one report, as a scan of all its files in one place prints it."""
    from trainprobe.checkpoint.scanning.report import ScanReport

    render_scan_report(console, ScanReport.from_json(data))


def _scan_summary(report: ScanReport) -> str:
    """A target's row in the fleet's table: files, tensors, what was found."""
    t = report.totals()
    found = f"{t['nonfinite']} non-finite in {t['bad_tensors']} tensor(s)" if t["nonfinite"] else "no NaN/Inf"
    unreadable = f", {t['files_unreadable']} unreadable" if t["files_unreadable"] else ""
    return f"{t['files']} file(s), {t['tensors']} tensors: {found}{unreadable}"


def add_arguments(parser: CommandParser) -> None:
    options = add_checkpoint_paths(parser)
    options.add_argument(
        "--stats", action="store_true", help="Add min, max, mean, std, absmax, L2 and zero fraction."
    )
    options.add_argument(
        "--verify", action="store_true", help="Check zip CRC32s and storage sizes against element counts."
    )
    options.add_argument(
        "--workers",
        type=at_least(1),
        metavar="N",
        help="Threads reading tensors (default: the usable cores, at most 32; 1: no threads). The report is "
        "the same whatever the number.",
    )
    add_sharded_option(
        parser,
        "each target scans the files it holds (shared ones split by size), and one report comes back, as a "
        "scan of all files in one place would give it.",
    )


_REMOTE = Remote(
    "fleet", "Scan on a remote target (ssh=user@host...).", "the remote scan", task="checkpoints:scan"
)


def scan(
    paths: list[str],
    *,
    stats: bool,
    verify: bool,
    workers: int | None,
    sharded: bool,
    out: Output,
    where: Where,
) -> int:
    if sharded:
        from trainprobe.tasks import scan_sharded

        targets = sharded_targets("scan", where, paths, "/local/ckpt/step_4000")
        return show_sharded(
            out,
            lambda progress: scan_sharded(
                targets, paths[0], stats=stats, verify=verify, on_progress=progress, **where.fleet_limits()
            ),
            _render_merged_scan, lambda result, _data: int(result.exit_code),
        )  # fmt: skip

    def here() -> ScanReport:
        from trainprobe.checkpoint import scan as scan_paths

        with out.progress("scanning", total=1.0) as advance:
            return scan_paths(paths, stats=stats, verify=verify, workers=workers, progress=advance)

    return show_report(
        out, where, paths, here=here, render=render_scan_report, summarise=_scan_summary, title="scanned",
        stats=stats, verify=verify,
    )  # fmt: skip


COMMAND = Command(
    _SCAN_HELP, "PATH... [options]", add_arguments, scan, _SCAN_EPILOG, remote=_REMOTE, schema_version=3
)
