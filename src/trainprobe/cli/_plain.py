"""Console text without rich: markup rendered as plain or ANSI-styled text, tables as plain text; stdlib only.

The CLI writes rich's markup (``[bold red]error:[/]``) and builds :class:`Table` objects. Markup is rendered
here — as plain text anywhere but a terminal (a pipe, a file, ``NO_COLOR``, ``TERM=dumb``), with ANSI styles
on one — and so are tables that do not go to a terminal; only a table drawn on a terminal goes through rich
(:mod:`trainprobe.cli._rich`). Output that is not a table never pays rich's import (~60 ms, more than most
commands' own work). The grammar is rich's, so one string renders the same through either path. Plain output
never wraps: a line, and a table row, stays one line whatever its width — for grep, scripts and agents.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainprobe.visible import visible, visible_lines

TYPE_CHECKING = False  # not typing's: a single run imports no typing (tests/remote/test_import_time.py)
if TYPE_CHECKING:
    from typing import TypedDict

    from typing_extensions import Unpack

    class ColumnOptions(TypedDict, total=False):
        """:class:`Column`'s keywords, as :meth:`Table.add_column` takes them."""

        justify: str
        min_width: int | None
        overflow: str | None
        style: str | None
        no_wrap: bool


#: a markup tag as rich reads it: ``[`` + a lower-case letter, ``#``, ``/`` or ``@`` ... ``]``, with the
#: backslashes before it (an odd number escapes the tag)
_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")

#: (top, header row, header rule, row, row rule, bottom): each left edge, fill, column divider, right edge
_HEAVY_HEAD = ("┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "├─┼┤", "└─┴┘")
_BOX_TOP_WITHOUT_HEADER = "┌─┬┐"


def escape(text: str) -> str:
    """``text`` (data: a name, a path, a message) made literal inside markup and inert on a terminal: what
    looks like a tag gets a backslash (rich's own escaping, so rich and :func:`render_markup` both show
    ``text`` as it is), and every control character — a newline too — is written as a visible escape
    (:func:`trainprobe.visible.visible`)."""
    escaped = _TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\[{m.group(2)}]", visible(text))
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        escaped += "\\"
    return escaped


def render_markup(markup: str, *, ansi: bool = False) -> str:
    """The text of ``markup``: its tags dropped, or (``ansi``) turned into terminal styles; escaped tags
    come out literally."""
    open_tags: list[str] = []

    def replace(match: re.Match[str]) -> str:
        backslashes, escaped = divmod(len(match.group(1)), 2)
        literal = "\\" * backslashes
        tag = match.group(2)
        if escaped:
            return f"{literal}[{tag}]"
        if not ansi:
            return literal
        if tag.startswith("/"):
            name = tag[1:].strip()
            if name in open_tags:
                del open_tags[len(open_tags) - 1 - open_tags[::-1].index(name)]
            elif not name and open_tags:
                open_tags.pop()
            return literal + _RESET + "".join(sgr(t) for t in open_tags)
        open_tags.append(tag)
        return literal + sgr(tag)

    text = _TAG.sub(replace, markup)
    return text + _RESET if ansi and open_tags else text


_RESET = "\x1b[0m"
_ATTRIBUTES = {"bold": 1, "b": 1, "dim": 2, "italic": 3, "i": 3, "underline": 4, "u": 4, "blink": 5,
               "reverse": 7, "strike": 9, "s": 9}  # fmt: skip
_COLOURS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")


def sgr(style: str) -> str:
    """The ANSI sequence of a rich style string made of attributes and 8/16 colours (``bold red``,
    ``dim``, ``white on red``); words it does not know are left out."""
    codes: list[int] = []
    background = False
    for word in style.lower().split():
        if word == "on":
            background = True
            continue
        base, bright = (word[7:], True) if word.startswith("bright_") else (word, False)
        if base in _COLOURS:
            codes.append(_COLOURS.index(base) + (90 if bright else 30) + (10 if background else 0))
        elif word in _ATTRIBUTES and not background:
            codes.append(_ATTRIBUTES[word])
        background = False
    return f"\x1b[{';'.join(map(str, codes))}m" if codes else ""


class Column:
    """One column of a :class:`Table`: its header and how its cells sit (``justify``: left, right, center)."""

    def __init__(
        self,
        header: str = "",
        *,
        justify: str = "left",
        min_width: int | None = None,
        overflow: str | None = None,
        style: str | None = None,
        no_wrap: bool = False,
    ) -> None:
        self.header = header
        self.justify = justify
        self.min_width = min_width
        self.overflow = overflow  # how rich folds a long cell on a terminal; plain text never folds
        self.style = style
        self.no_wrap = no_wrap


class Table:
    """A table of markup cells, built like rich's ``Table`` (the keywords the commands use).

    ``box=None`` draws no lines (columns apart by their padding); ``padding`` is rich's: an int, (vertical,
    horizontal) or (top, right, bottom, left); only the horizontal part applies to plain text.
    """

    def __init__(
        self,
        *headers: str,
        title: str | None = None,
        show_header: bool = True,
        header_style: str | None = None,
        show_edge: bool = True,
        box: str | None = "heavy_head",
        padding: int | Sequence[int] = (0, 1),
        pad_edge: bool = True,
        expand: bool = False,
        show_lines: bool = False,
    ) -> None:
        self.columns = [Column(header) for header in headers]
        self.rows: list[tuple[list[str], str | None]] = []
        self.title = None if title is None else visible_lines(title)
        self.show_header = show_header
        self.header_style = header_style
        self.show_edge = show_edge
        self.box = box
        self.padding = padding
        self.pad_edge = pad_edge
        self.expand = expand
        self.show_lines = show_lines

    def add_column(self, header: str = "", **options: Unpack[ColumnOptions]) -> None:
        """A column: :class:`Column`'s keywords, with its defaults."""
        self.columns.append(Column(header, **options))

    def add_row(self, *cells: str, style: str | None = None) -> None:
        """A row of markup cells; a control character in a cell (data that was not escaped) is made visible
        here, a cell's own line breaks kept."""
        while len(self.columns) < len(cells):
            self.columns.append(Column())
        self.rows.append(([visible_lines(cell) for cell in cells], style))

    def plain_lines(self) -> list[str]:
        """The table as lines of plain text: whole rows, a cell's own line breaks kept."""
        n = len(self.columns)
        header = [render_markup(c.header).split("\n") for c in self.columns]
        body = [
            [render_markup(cells[i]).split("\n") if i < len(cells) else [""] for i in range(n)]
            for cells, _style in self.rows
        ]
        widths = [
            max(
                [column.min_width or 0, *(len(line) for line in header[i])]
                + [len(line) for row in body for line in row[i]]
            )
            for i, column in enumerate(self.columns)
        ]
        left, right = _horizontal_padding(self.padding)
        boxed = self.box is not None
        lines: list[str] = []

        def pad(i: int) -> tuple[str, str]:
            edge = not self.pad_edge
            return ("" if edge and i == 0 else " " * left, "" if edge and i == n - 1 else " " * right)

        def rule(chars: str) -> None:
            if not boxed:
                return
            start, fill, divider, end = tuple(chars)
            parts = [fill * (widths[i] + sum(len(p) for p in pad(i))) for i in range(n)]
            lines.append(
                (start if self.show_edge else "") + divider.join(parts) + (end if self.show_edge else "")
            )

        def row(cells: list[list[str]], chars: str) -> None:
            start, _fill, divider, end = tuple(chars) if boxed else ("", "", "", "")
            for k in range(max(len(cell) for cell in cells)):
                parts = []
                for i, column in enumerate(self.columns):
                    text = cells[i][k] if k < len(cells[i]) else ""
                    before, after = pad(i)
                    parts.append(before + _justify(text, widths[i], column.justify) + after)
                edge = self.show_edge and boxed
                lines.append(((start if edge else "") + divider.join(parts) + (end if edge else "")).rstrip())

        top, head, head_rule, body_row, body_rule, bottom = _HEAVY_HEAD
        if self.show_edge:
            rule(top if self.show_header else _BOX_TOP_WITHOUT_HEADER)
        if self.show_header:
            row(header, head)
            rule(head_rule)
        for index, cells in enumerate(body):
            if index and self.show_lines:
                rule(body_rule)
            row(cells, body_row)
        if self.show_edge:
            rule(bottom)
        if self.title:
            width = max((len(line) for line in lines), default=0)
            lines.insert(0, render_markup(self.title).center(width).rstrip())
        return lines


def _horizontal_padding(padding: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(padding, int):
        return padding, padding
    if len(padding) == 2:
        return padding[1], padding[1]
    if len(padding) == 4:
        return padding[3], padding[1]
    return 0, 0


def _justify(text: str, width: int, how: str) -> str:
    if how == "right":
        return text.rjust(width)
    if how == "center":
        return text.center(width)
    return text.ljust(width)
