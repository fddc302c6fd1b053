"""`trainprobe check`."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app
from trainprobe.errors import UsageError

_CHECK_HELP = (
    "Is each checkpoint one consistent snapshot? A verdict per checkpoint with the evidence that decided it: "
    "consistent, torn (it mixes optimizer steps), corrupt (damaged container), unknown (not enough evidence "
    "in one file) or unreadable.\n\n"
    "Evidence: Adam/AdamW step counters all equal and equal to the checkpoint's step field; exp_avg_sq >= 0; "
    "exp_avg == 0 where exp_avg_sq == 0; the Adam bound |m| <= (1-b1)/sqrt((1-b2)(1-b1²/b2))·sqrt(v) (7.27 "
    "for betas 0.9/0.999); state shaped like its parameter; param_groups cover the state; bf16/fp16 weights "
    "equal the cast of their fp32 master copy; zip CRC32s and record sizes; DCP chunks tile each tensor and "
    "every shard file exists; HF index entries present; the CheckpointWriter manifest (sha256, step). "
    "NaN/Inf are reported too. Never imports torch and never executes anything from the file.\n\n"
    "\b\nExamples:\n"
    "  trainprobe check ckpt/step-00001000.pt\n"
    "  trainprobe check ckpt/                        all checkpoints below\n"
    "  trainprobe check 'runs/*/last.ckpt' --json    JSON, schema_version 1\n"
    "  trainprobe check /data/ckpt --on user@gpu01   where the files are\n\n"
    "Exit codes: 0 consistent (or unknown, unless --strict); 1 torn, corrupt or NaN/Inf found (wins over "
    "unreadable); 2 a checkpoint unreadable, or a usage error."
)

_MARK = {
    "consistent": "[green]✓ consistent[/]",
    "torn": "[bold red]✗ TORN[/]",
    "corrupt": "[bold red]✗ CORRUPT[/]",
    "unknown": "[yellow]? unknown[/]",
    "unreadable": "[yellow]! unreadable[/]",
}
_OUTCOME = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "skip": "[dim]skip[/]"}


def render_check_report(console: Console, report: dict[str, Any]) -> None:
    """The human form of a check report's JSON (identical for local and remote checks)."""
    for c in report["checkpoints"]:
        console.print(f"{_MARK.get(c['verdict'], c['verdict'])}  [bold]{escape(c['path'])}[/]")
        console.print(
            f"    {escape(c['reason'])}",
            style="dim" if c["verdict"] == "consistent" else None,
            soft_wrap=True,
        )
        for e in c["evidence"]:
            console.print(
                f"    {_OUTCOME[e['outcome']]} {e['check']:<22} {escape(e['message'])}", soft_wrap=True
            )
        for bad in c["nonfinite"][:10]:
            counts = f"{bad['nan']} NaN, {bad['posinf']} +Inf, {bad['neginf']} -Inf"
            console.print(f"    [red]{escape(bad['name'])}: {counts}[/]")
    summary = ", ".join(f"{n} {verdict}" for verdict, n in report["summary"].items())
    console.print(f"{len(report['checkpoints'])} checkpoint(s): {summary}")


def _exit_code(report: dict[str, Any], strict: bool) -> int:
    code = int(report["exit_code"])
    if strict and code == 0 and any(c["verdict"] == "unknown" for c in report["checkpoints"]):
        return 1
    return code


@app.command(help=_CHECK_HELP)
def check(
    paths: list[str] = typer.Argument(
        ..., metavar="PATH...", help="Checkpoint files, directories or quoted globs."
    ),
    json_mode: bool = typer.Option(
        False, "--json", help="Print the JSON report (schema_version 1) to stdout."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing; only the exit code tells."),
    strict: bool = typer.Option(
        False, "--strict", help="Exit 1 when a verdict is 'unknown' (not enough evidence)."
    ),
    on: str | None = typer.Option(
        None, "--on", metavar="TARGET", help="Check on a remote target (user@host...)."
    ),
    timeout: float = typer.Option(
        3600.0, "--timeout", help="With --on: seconds before the remote check is killed."
    ),
    connect_timeout: float = typer.Option(20.0, "--connect-timeout", help="With --on: seconds to connect."),
) -> None:
    out = Output(json_mode=json_mode, quiet=quiet)
    with reported_errors(out):
        if on is not None:
            report = _check_on(on, list(paths), timeout, connect_timeout)
        else:
            from trainprobe.checkpoint.check import check_paths

            report = check_paths(list(paths)).to_json()
        out.result(report, lambda console: render_check_report(console, report))
    raise typer.Exit(_exit_code(report, strict))


def _check_on(target: str, paths: list[str], timeout: float, connect_timeout: float) -> dict[str, Any]:
    try:
        from trainprobe import remote
    except ImportError:
        raise UsageError("remote checking (--on) is not available in this installation") from None
    from trainprobe.checkpoint import check as check_module

    value = remote.call(
        target,
        check_module.check_paths_json,
        paths,
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=["numpy"],
    )
    if not isinstance(value, dict) or "checkpoints" not in value:
        raise UsageError(f"{target}: the remote check returned no report")
    return value
