"""The terminal side of the output sink: trainprobe's tables and progress bars drawn by rich.

Imported only when output goes to a terminal (see :mod:`trainprobe.cli._output`); nothing else in the CLI
imports rich.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import rich.box
import rich.table
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from trainprobe.cli._plain import Table

_BOXES = {"heavy_head": rich.box.HEAVY_HEAD}


def to_rich(o: object) -> object:
    """``o`` as rich prints it: a :class:`Table` becomes rich's table; anything else is kept."""
    if not isinstance(o, Table):
        return o
    table = rich.table.Table(
        title=o.title,
        show_header=o.show_header,
        header_style=o.header_style or "table.header",
        show_edge=o.show_edge,
        box=None if o.box is None else _BOXES[o.box],
        padding=tuple(o.padding) if not isinstance(o.padding, int) else o.padding,  # type: ignore[arg-type]
        pad_edge=o.pad_edge,
        expand=o.expand,
        show_lines=o.show_lines,
    )
    for c in o.columns:
        table.add_column(
            c.header,
            justify=c.justify,  # type: ignore[arg-type]
            min_width=c.min_width,
            overflow=c.overflow or "ellipsis",  # type: ignore[arg-type]
            style=c.style or "",
            no_wrap=c.no_wrap,
        )
    for cells, style in o.rows:
        table.add_row(*cells, style=style)
    return table


@contextmanager
def progress_bar(description: str, total: float | None) -> Iterator[Callable[[float], None]]:
    """A transient progress bar on stderr; yields ``advance(n)``."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
