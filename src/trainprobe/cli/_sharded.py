"""``scan|check --on FLEET --sharded PATH``: one unit scanned (or checked) on the targets that hold its files,
one report. Progress per target (files and bytes) on stderr; the report, then who read what and what was not
read."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from trainprobe.cli._output import Console, Output
from trainprobe.cli._plain import Table, escape
from trainprobe.cli._sizes import human_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

    from trainprobe.cli._command import CommandParser
    from trainprobe.cli._where import Where
    from trainprobe.remote.target import Target
    from trainprobe.tasks import ShareProgress


class _Progress:
    """One stderr line per target at most every second, and one when it ends."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.last: dict[str, float] = {}
        self.started = time.monotonic()

    def __call__(self, p: ShareProgress) -> None:
        now = time.monotonic()
        with self.lock:
            if not p.done and now - self.last.get(p.target, 0.0) < 1.0:
                return
            self.last[p.target] = now
        done = f"{p.files_done}/{p.files} file(s), {human_bytes(p.bytes_done)}/{human_bytes(p.bytes)}"
        if p.error is not None:
            self.out.note(f"✗ {p.target}: failed after {done}: {p.error}")
        elif p.done:
            self.out.note(f"✓ {p.target}: {done} in {now - self.started:.1f} s")
        else:
            self.out.note(f"  {p.target}: {done}")


def render_shares(console: Console, sharded: dict[str, Any]) -> None:
    """Who read what, the files no target holds, conflicts and failed targets."""
    table = Table("target", "status", "files", "bytes", "seconds", "read", title="who read what")
    for t in sharded["targets"]:
        style = "green" if t["status"] == "ok" else "bold red"
        table.add_row(
            escape(t["target"]),
            f"[{style}]{t['status']}[/]",
            str(len(t["files"])),
            human_bytes(t["bytes"]),
            f"{t['seconds']:.2f}",
            escape(", ".join(t["files"][:4]) + (f" (+{len(t['files']) - 4})" if len(t["files"]) > 4 else "")),
        )
    console.print(table)
    for part, files in sharded["missing"].items():
        console.print(f"[bold red]no target holds[/] {escape(', '.join(files))} [dim](of {escape(part)})[/]")
    for conflict in sharded["conflicts"]:
        console.print(f"[bold red]conflict:[/] {escape(conflict)}", soft_wrap=True)
    for target, why in sharded["failed"].items():
        console.print(f"[bold red]{escape(target)} failed:[/] {escape(why)}", soft_wrap=True)


def add_sharded_option(parser: CommandParser, does: str) -> None:
    """--sharded, in the command's --on group: ``does`` says what each target does and what comes back."""
    remote = parser.command.remote
    parser.group(remote.heading if remote is not None else "options").add_argument(
        "--sharded", action="store_true",
        help="With a fleet: PATH is one checkpoint unit whose files are spread over the targets (node-local "
        f"disks, or storage several see): {does}",
    )  # fmt: skip


def sharded_targets(command: str, where: Where, paths: list[str], example: str) -> list[Target]:
    """The targets of ``command --sharded``: it takes --on (the targets that hold the files) and one PATH."""
    if not where.on or len(paths) != 1:
        from trainprobe.errors import UsageError

        raise UsageError(
            "--sharded takes --on (the targets that hold the files) and one PATH (the unit)",
            hint=f"e.g. trainprobe {command} --on 'ssh=node[01-04]' --sharded {example}",
        )
    return where.targets()


def show_sharded(
    out: Output,
    run: Callable[[Callable[[ShareProgress], None] | None], Any],
    render_report: Callable[[Console, dict[str, Any]], None],
    code_of: Callable[[Any, dict[str, Any]], int],
) -> int:
    """``run(on_progress)`` (a ``tasks.scan_sharded`` or ``check_sharded``), its progress on stderr, then its
    one report (``render_report`` of its JSON) and who read what; returns ``code_of(result, document)``."""
    result = run(None if out.quiet else _Progress(out))
    data = result.to_json()

    def render(console: Console) -> None:
        render_report(console, data)
        render_shares(console, data["sharded"])

    out.result(data, render)
    return code_of(result, data)
