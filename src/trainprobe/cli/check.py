"""`trainprobe check`: is each checkpoint one consistent snapshot (here, on a target or on a fleet)."""

from __future__ import annotations

from typing import Any

from trainprobe.cli._command import Command, CommandParser, add_checkpoint_paths
from trainprobe.cli._fleet import show_report
from trainprobe.cli._output import Console, Output
from trainprobe.cli._plain import escape
from trainprobe.cli._sharded import add_sharded_option, sharded_targets, show_sharded
from trainprobe.cli._verdicts import EXIT_CODES, FLEET_EXIT_CODES, MARK
from trainprobe.cli._where import Remote, Where
from trainprobe.plugins import FRAMEWORKS, OPTIMIZER_FAMILIES, help_list

_CHECK_HELP = (
    "A checkpoint is a unit: a file, or a directory a framework writes as one checkpoint (the layouts known: "
    f"{help_list(FRAMEWORKS)}). One verdict per unit: consistent, torn (it mixes training steps), corrupt "
    "(damaged), nonfinite, suspicious, unknown (not enough evidence) or unreadable.\n\n"
    "Evidence: step sources agree (the name, trainer_state.json, the step field, the scheduler, the "
    "optimizer's per-parameter step counters); Adam exp_avg_sq >= 0, exp_avg == 0 where exp_avg_sq == 0 and "
    "the bound |m| <= (1-b1)/sqrt((1-b2)(1-b1²/b2))·sqrt(v) (7.27 for betas 0.9/0.999), per optimizer family "
    f"({help_list(OPTIMIZER_FAMILIES)}: what holds for each, the rest shown as skipped); state "
    "shaped like its parameter and covering every parameter of the unit's model; ZeRO partitions for every "
    "rank; bf16/fp16 weights equal the cast of their fp32 master copy; zip CRC32s, record sizes and the "
    "bytes around each record; every JSON file of the unit parses; DCP chunks tile each tensor; HF index "
    "entries present; the CheckpointWriter manifest; identical units. "
    "NaN/Inf count only in weights and optimizer state. Never imports torch and never executes anything "
    "from the file.\n\n"
    "--on takes a target (ssh=host//docker=trainer, see trainprobe run --help); repeat it, or give a range "
    "(ssh=node[01-16]), a name or group from the targets file, or slurm=JOBID, to check on a fleet: one "
    "report per target, then a table of the targets."
)

_CHECK_EPILOG = (
    "examples:\n"
    "  trainprobe check ckpt/step-00001000.pt\n"
    "  trainprobe check out/                         every unit below (checkpoint-N/ ...)\n"
    "  trainprobe check 'runs/*/last.ckpt' --json    JSON, schema_version 3\n"
    "  trainprobe check /data/ckpt --on ssh=user@gpu01   where the files are\n"
    "  trainprobe check /ckpt/step_4000 --on 'ssh=node[01-08]'   on each node of a fleet\n"
    "  trainprobe check --on 'ssh=login//slurm=812345' --sharded /local/ckpt/global_step4000\n"
    "                                                one unit whose files are spread over the nodes:\n"
    "                                                each node checks what it holds, one verdict\n\n"
    f"{EXIT_CODES}\n\n"
    "--sharded: each target lists what it has of PATH; a part is checked whole by a target that holds all "
    "its files (a DeepSpeed partition, an optimizer.pt, a DCP directory on storage one target sees): that "
    "evidence is exactly a check in one place. A DCP directory whose rank files no one target holds is "
    "checked in shares: NaN/Inf, CRC32s, chunk coverage and missing files exactly; the checks that relate "
    "its rank files (param_groups, Adam pairs, master weights...) are listed as not made (verdict at best "
    "unknown). A target that fails: its files are reported as not read (exit 1).\n\n"
    f"--strict: unknown exits 1 too. {FLEET_EXIT_CODES}"
)

_OUTCOME = {
    "pass": "[green]pass[/]",
    "fail": "[bold red]FAIL[/]",
    "skip": "[dim]skip[/]",
    "note": "[dim]note[/]",
}


def render_check_report(console: Console, report: dict[str, Any]) -> None:
    """The human form of a check report's JSON (identical for local and remote checks)."""
    for c in report["units"]:
        files = c.get("files") or []
        extra = ""
        if len(files) > 1 or (files and files[0]["path"] != c["path"]):
            extra = f"  [dim]{c.get('framework', '')} · {len(files)} file(s)"
            extra += (
                f" · step {c['step']} ({c.get('step_source', '')})[/]" if c.get("step") is not None else "[/]"
            )
        console.print(f"{MARK.get(c['verdict'], c['verdict'])}  [bold]{escape(c['path'])}[/]{extra}")
        console.print(
            f"    {escape(c['reason'])}",
            style="dim" if c["verdict"] == "consistent" else None,
            soft_wrap=True,
        )
        for e in c["evidence"]:
            where = f"[dim]{escape(e['file'])}:[/] " if e.get("file") else ""
            outcome = _OUTCOME.get(e["outcome"], e["outcome"])
            console.print(
                f"    {outcome} {e['check']:<22} {where}{escape(e['message'])}",
                soft_wrap=True,
            )
        for note in c.get("notes", []):
            style = "bold red" if note["kind"] == "suspicious-global" else "dim"
            console.print(f"    [{style}]{escape(note['message'])}[/]", soft_wrap=True)
        for bad in c["nonfinite"][:10]:
            counts = f"{bad['nan']} NaN, {bad['posinf']} +Inf, {bad['neginf']} -Inf"
            console.print(f"    [red]{escape(bad['name'])}: {counts}[/]")
    summary = ", ".join(f"{n} {verdict}" for verdict, n in report["summary"].items())
    console.print(f"{len(report['units'])} checkpoint(s): {summary}")


def exit_code(report: dict[str, Any], strict: bool) -> int:
    """A check report's exit code (the report's, from the one verdict rule); ``strict``: unknown is 1."""
    code = int(report["exit_code"])
    if strict and code == 0 and any(c["verdict"] == "unknown" for c in report["units"]):
        return 1
    return code


def add_arguments(parser: CommandParser) -> None:
    options = add_checkpoint_paths(parser)
    options.add_argument(
        "--strict", action="store_true", help="Exit 1 when a verdict is 'unknown' (not enough evidence)."
    )
    add_sharded_option(
        parser,
        "each target checks the parts it holds, and one verdict comes back (see below for what a part split "
        "over targets can and cannot show).",
    )


_REMOTE = Remote(
    "fleet", "Check on a remote target (ssh=user@host...).", "the remote check", task="checkpoints:check"
)


def check(paths: list[str], *, strict: bool, sharded: bool, out: Output, where: Where) -> int:
    if sharded:
        from trainprobe.tasks import check_sharded

        targets = sharded_targets("check", where, paths, "/local/ckpt/global_step4000")
        return show_sharded(
            out,
            lambda progress: check_sharded(targets, paths[0], on_progress=progress, **where.fleet_limits()),
            render_check_report, lambda result, data: 1 if result.failed else exit_code(data, strict),
        )  # fmt: skip

    def here() -> dict[str, Any]:
        from trainprobe.checkpoint.check import check_paths

        return check_paths(list(paths)).to_json()

    return show_report(
        out, where, paths, here=here, render=render_check_report, summarise=_check_summary, title="checked",
        code_of=lambda report: exit_code(report, strict),
    )  # fmt: skip


def _check_summary(report: dict[str, Any]) -> str:
    return ", ".join(f"{n} {verdict}" for verdict, n in report["summary"].items()) or "no checkpoint"


COMMAND = Command(
    _CHECK_HELP, "PATH... [options]", add_arguments, check, _CHECK_EPILOG, remote=_REMOTE, schema_version=3
)
