"""The one output sink: commands hand results here and never print themselves.

Human output goes to stdout, notes and errors to stderr, as rich markup strings (``[bold red]…[/]``, with
:func:`escape` around anything that is data) and :class:`Table` objects, through a :class:`Console`. On a
terminal (a tty, ``NO_COLOR`` unset, ``TERM`` not ``dumb``) markup becomes ANSI styles and tables are drawn
by rich (imported then, and only then); anywhere else both become plain text (:mod:`trainprobe.cli._plain`)
and rich is never imported. ``--json`` writes exactly one JSON document to stdout (:func:`json_text`: always
valid JSON). Progress bars go to stderr, on a terminal only.

Every write is flushed at once (a finding ``watch`` prints reaches a pipe when it is found) and a failed write
is one error: a closed pipe raises ``BrokenPipeError`` (the program exits 141), anything else (a full disk)
:class:`~trainprobe.cli._streams.OutputError` (see :mod:`trainprobe.cli._errors`).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, TextIO

from trainprobe.cli._plain import Table, escape, render_markup, sgr
from trainprobe.cli._streams import OutputError, write
from trainprobe.visible import visible_lines, visible_surrogates

if TYPE_CHECKING:
    import threading

    import rich.console

__all__ = ["Console", "LiveOutput", "Output", "json_text"]


def styled(stream: IO[str] | IO[bytes]) -> bool:
    """Whether output to ``stream`` is for a person at a terminal that shows colour."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


class Console:
    """Where a command's human output goes (stdout, or stderr with ``stderr=True``).

    ``print`` takes markup strings, :class:`Table` objects or anything else (printed as ``str``); the
    keywords are rich's. The stream is looked up on every call, so a redirected ``sys.stdout`` is honoured.
    """

    def __init__(self, *, stderr: bool = False) -> None:
        self.stderr = stderr
        self._rich: rich.console.Console | None = None

    @property
    def file(self) -> TextIO:
        return sys.stderr if self.stderr else sys.stdout

    @property
    def name(self) -> str:
        return "stderr" if self.stderr else "stdout"

    @property
    def is_terminal(self) -> bool:
        try:
            return self.file.isatty()
        except ValueError:
            return False

    @property
    def width(self) -> int:
        if self.is_terminal:
            import shutil

            return shutil.get_terminal_size().columns
        try:
            return int(os.environ.get("COLUMNS", ""))
        except ValueError:
            return 80

    def _rich_console(self) -> rich.console.Console:
        if self._rich is None or self._rich.file is not self.file:
            from rich.console import Console as RichConsole

            # soft_wrap: a long line stays one line (people copy paths); emoji off: ":x:" stays text, as
            # in plain output
            self._rich = RichConsole(file=self.file, soft_wrap=True, highlight=False, emoji=False)
        return self._rich

    def print(
        self,
        *objects: object,
        sep: str = " ",
        end: str = "\n",
        style: str | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        soft_wrap: bool | None = None,
    ) -> None:
        """Print ``objects`` (rich's keywords; ``highlight`` and ``soft_wrap`` only matter to rich: text is
        never highlighted nor wrapped)."""
        ansi = styled(self.file)
        if ansi and any(isinstance(o, Table) for o in objects):  # a table on a terminal: rich fits it
            self._print_rich(objects, sep=sep, end=end, style=style, markup=markup)
            return
        text = sep.join(_plain(o, markup is not False, ansi) for o in objects)
        if ansi and style:
            text = f"{sgr(style)}{text}\x1b[0m"
        write(self.file, self.name, text + end)

    def _print_rich(
        self, objects: tuple[object, ...], *, sep: str, end: str, style: str | None, markup: bool | None
    ) -> None:
        from trainprobe.cli._rich import to_rich

        try:
            self._rich_console().print(
                *(to_rich(visible_lines(o) if isinstance(o, str) else o) for o in objects),
                sep=sep,
                end=end,
                style=style,
                markup=markup,
                soft_wrap=True,
            )
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(self.name, exc) from None

    def rule(self, title: str = "") -> None:
        """A horizontal line across the width, ``title`` in its middle."""
        text = f" {escape(title)} " if title else ""
        side = max(2, (self.width - len(title) - 2) // 2)
        self.print("─" * side + text + "─" * side)


def _plain(o: object, markup: bool, ansi: bool) -> str:
    """``o`` as text for the stream. Whatever reaches the console is inert: a control character that data
    brought in (ESC, BEL, a carriage return; anything not escaped where it was formatted) is made visible
    here, before our own styles are added; line breaks are kept (a string may be several lines)."""
    if isinstance(o, Table):
        return "\n".join(o.plain_lines())
    text = visible_lines(o if isinstance(o, str) else str(o))
    return render_markup(text, ansi=ansi) if markup else text


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON text that any JSON reader accepts: a value JSON cannot hold — NaN or ±Infinity, an
    integer beyond Python's int-to-text limit (4300 digits), a key that is not a string or a number — is
    written as ``null``, the integer's hex string, the key's text; any other value JSON has no type for as its
    ``str``."""
    import json

    try:
        text = json.dumps(data, indent=indent, default=str, allow_nan=False)
    except (ValueError, TypeError):  # TypeError: a key JSON cannot have (a tuple)
        return json.dumps(_json_safe(data), indent=indent, default=str, allow_nan=False)
    if _LONE_SURROGATE.search(text):
        return json.dumps(_json_safe(data), indent=indent, default=str, allow_nan=False)
    return text


#: a ``\uXXXX`` escape of half a surrogate pair without its other half: valid JSON syntax, but not I-JSON
#: (RFC 7493), and many readers refuse it
_LONE_SURROGATE = re.compile(
    r"\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}"
)


def _json_safe(value: Any) -> Any:
    if isinstance(value, str):
        # a lone surrogate (a name that was not UTF-8, as os.fsdecode gives it) as its visible escape:
        # "\\xff" for the byte 0xff (the scheme of docs/names.md); documents that carry a name's bytes have
        # them in a field of their own
        return visible_surrogates(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            str(value)
        except ValueError:
            return hex(value)
        return value
    if isinstance(value, dict):
        return {_json_key(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _json_key(key: Any) -> Any:
    if isinstance(key, str):
        return visible_surrogates(key)
    if key is None or isinstance(key, bool):
        return key
    safe = _json_safe(key)
    return safe if isinstance(safe, (int, str)) else str(key)


class LiveOutput:
    """A binary stream for output that arrives while work runs (a run's live output, a fleet's lines).

    Every chunk is written and flushed at once. The first failure (a closed pipe, a full disk) sets
    ``cancel`` (if given: the work stops, the far side is killed) and drops what follows;
    :meth:`raise_failure` raises it once the work has returned, so the command ends the way any failed write
    ends it.
    """

    def __init__(self, stream: IO[bytes], name: str, cancel: threading.Event | None = None) -> None:
        self.stream = stream
        self.name = name
        self.cancel = cancel
        self.failure: OSError | None = None

    def write(self, data: bytes) -> None:
        if self.failure is not None:
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except OSError as exc:  # in a worker thread too: never raised where it happens
            self.failure = exc
            if self.cancel is not None:
                self.cancel.set()

    __call__ = write

    def flush(self) -> None:  # each write is flushed already
        pass

    def raise_failure(self) -> None:
        if isinstance(self.failure, BrokenPipeError):
            raise self.failure
        if self.failure is not None:
            raise OutputError(self.name, self.failure)


class Output:
    """A command's sink: ``result`` (JSON or rendered), ``note`` and ``error`` (stderr), ``progress``."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self.console = Console()
        self.err = Console(stderr=True)

    def result(self, data: Any, render: Callable[[Console], None]) -> None:
        """Emit one command's result: ``data`` as JSON in ``--json`` mode, else ``render`` it for people."""
        if self.json_mode:
            self.json(data)
        elif not self.quiet:
            render(self.console)

    def json(self, data: Any, *, indent: int | None = 2) -> None:
        """One JSON document on stdout (``indent=None``: one line, as JSON Lines)."""
        write(sys.stdout, "stdout", json_text(data, indent=indent) + "\n")

    def note(self, message: str, *, markup: bool = False) -> None:
        """A side remark for people (where a log was kept, what to try); stderr, never in JSON. Plain text
        unless ``markup``."""
        if not self.quiet:
            self.err.print(message, markup=markup)

    def error(self, message: str) -> None:
        self.err.print(f"[bold red]error:[/] {escape(message)}")

    def live(self, cancel: threading.Event | None = None, *, stderr: bool = False) -> LiveOutput:
        """A :class:`LiveOutput` on stdout (or stderr) whose failure sets ``cancel``."""
        stream, name = (sys.stderr, "stderr") if stderr else (sys.stdout, "stdout")
        return LiveOutput(stream.buffer, name, cancel)

    @contextmanager
    def progress(self, description: str, total: float | None) -> Iterator[Callable[[float], None]]:
        """A progress bar on stderr; yields ``advance(n)``. Only on a terminal (nothing, not even rich's
        import, anywhere else)."""
        if self.quiet or not self.err.is_terminal or os.environ.get("TERM") == "dumb":
            yield lambda _n: None
            return
        from trainprobe.cli._rich import progress_bar

        with progress_bar(description, total) as advance:
            yield advance
