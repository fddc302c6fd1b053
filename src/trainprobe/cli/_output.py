"""The one output sink: commands hand results here and never print themselves.

Human output goes to stdout through rich; ``--json`` writes exactly one JSON document to stdout; progress bars
and notes go to stderr and vanish when stderr is not a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn


class Output:
    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        # soft_wrap: a long report line or error stays one line when piped into a file or grep (rich would
        # otherwise wrap at 80 columns whenever the stream is not a terminal).
        self.console = Console(soft_wrap=True, highlight=False)
        self.err = Console(stderr=True, soft_wrap=True, highlight=False)

    def result(self, data: Any, render: Callable[[Console], None]) -> None:
        """Emit one command's result: ``data`` as JSON in ``--json`` mode, else ``render`` it for people."""
        if self.json_mode:
            sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str, allow_nan=False) + "\n")
            sys.stdout.flush()
        elif not self.quiet:
            render(self.console)

    def note(self, message: str) -> None:
        """A side remark for people (where a log was kept, what to try); stderr, never in JSON."""
        if not self.quiet:
            self.err.print(message)

    def error(self, message: str) -> None:
        self.err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)

    @contextmanager
    def progress(self, description: str, total: float | None) -> Iterator[Callable[[float], None]]:
        """A progress bar on stderr; yields ``advance(n)``. Invisible when stderr is not a terminal."""
        if self.quiet or not self.err.is_terminal:
            yield lambda _n: None
            return
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)
