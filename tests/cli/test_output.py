"""The output sink without a terminal: rich's markup and tables as plain text (no rich), the same strings
through rich on a terminal, JSON that is always valid, live output whose failure stops the work."""

from __future__ import annotations

import io
import json
import threading

import pytest
from rich.console import Console as RichConsole

from trainprobe.cli._output import Console, LiveOutput, json_text
from trainprobe.cli._plain import Table, escape, render_markup
from trainprobe.cli._streams import OutputError

TRICKY = [
    "plain text",
    "a [bold] word that is data",
    "pip install 'trainprobe[plot]'",
    "ssh=node[01-16] and shape [2, 3]",
    "back\\slash [red]x[/] and a trailing backslash\\",
    "\\[already escaped]",
    "[/] [/bold] [#ff0000] [@click]",
]


@pytest.mark.parametrize("text", TRICKY)
def test_escaped_text_comes_out_as_it_is_in_plain_text_and_through_rich(text: str) -> None:
    markup = f"[bold]{escape(text)}[/]"  # as the commands use it: data inside markup
    assert render_markup(markup) == text
    rich = RichConsole(file=io.StringIO(), width=500, color_system=None, highlight=False, emoji=False)
    rich.print(markup, end="")
    assert rich.file.getvalue() == text  # type: ignore[attr-defined]


def test_markup_tags_are_dropped_or_styled() -> None:
    markup = "[bold red]✗ NON-FINITE[/]  [bold]a.pt[/]  [dim]3 tensors[/dim] [green]ok[/]"
    assert render_markup(markup) == "✗ NON-FINITE  a.pt  3 tensors ok"
    assert render_markup(markup, ansi=True) == (
        "\x1b[1;31m✗ NON-FINITE\x1b[0m  \x1b[1ma.pt\x1b[0m  \x1b[2m3 tensors\x1b[0m \x1b[32mok\x1b[0m"
    )
    nested = render_markup("[bold]a [red]b[/red] c[/bold]", ansi=True)
    assert nested == "\x1b[1ma \x1b[31mb\x1b[0m\x1b[1m c\x1b[0m"


def test_plain_table_rows_stay_whole_lines() -> None:
    table = Table("target", "status", "summary", title="targets")
    table.add_row("ssh=a", "[green]ok[/]", "x" * 150)
    table.add_row("ssh=node[01-16]", "[red]failed[/]", "two\nlines")
    lines = table.plain_lines()
    assert lines[0] == "targets".center(len(lines[1])).rstrip()
    assert lines[1:] == [
        "┏━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━" + "━" * 150 + "━┓",
        "┃ target          ┃ status ┃ summary" + " " * 143 + " ┃",
        "┡━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━" + "━" * 150 + "━┩",
        "│ ssh=a           │ ok     │ " + "x" * 150 + " │",
        "│ ssh=node[01-16] │ failed │ two" + " " * 147 + " │",
        "│                 │        │ lines" + " " * 145 + " │",
        "└─────────────────┴────────┴─" + "─" * 150 + "─┘",
    ]


def test_plain_table_without_box_aligns_columns() -> None:
    table = Table(show_edge=False, box=None, padding=(0, 1), pad_edge=False)
    table.add_column("tensor")
    table.add_column("status", min_width=9)
    table.add_column("rel change", justify="right")
    table.add_row("layer.weight", "changed", "0.5")
    table.add_row("b", "[dim]identical[/]", "—", style="dim")
    assert table.plain_lines() == [
        "tensor        status     rel change",
        "layer.weight  changed           0.5",
        "b             identical           —",
    ]


def test_a_console_off_a_terminal_prints_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    console = Console()
    table = Table("a", "b")
    table.add_row("[bold]1[/]", "2")
    console.print("[bold red]error:[/] x", style="dim")
    console.print(table)
    console.print("[not markup]", markup=False)
    assert capsys.readouterr().out == (
        "error: x\n┏━━━┳━━━┓\n┃ a ┃ b ┃\n┡━━━╇━━━┩\n│ 1 │ 2 │\n└───┴───┘\n[not markup]\n"
    )


class FakeTerminal(io.StringIO):
    """A text stream that says it is a tty: what the sink does for a person at a terminal."""

    def isatty(self) -> bool:
        return True


def test_on_a_terminal_text_is_styled_and_tables_are_drawn_by_rich(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stdout", terminal)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    console = Console()
    console.print("[green]✓ clean[/]", style="dim")
    table = Table("target", "status")
    table.add_row("a", "[green]ok[/]")
    console.print(table)
    out = terminal.getvalue()
    assert out.startswith("\x1b[2m\x1b[32m✓ clean\x1b[0m\x1b[0m\n")
    assert "target" in out
    assert "\x1b[32mok" in out
    monkeypatch.setenv("NO_COLOR", "1")  # NO_COLOR: plain text, even on a terminal
    terminal.seek(0)
    terminal.truncate()
    console.print(table)
    assert terminal.getvalue().splitlines()[1] == "┃ target ┃ status ┃"


def test_json_is_always_valid_json() -> None:
    data = {"nan": float("nan"), "inf": [float("inf"), -float("inf")], 7: 1.5, "huge": 10**5000, (1, 2): 0}
    parsed = json.loads(json_text(data))
    assert parsed == {"nan": None, "inf": [None, None], "7": 1.5, "huge": hex(10**5000), "(1, 2)": 0}
    assert json_text({"a": [1, 2]}, indent=None) == '{"a": [1, 2]}'
    assert json.loads(json_text({"path": object.__new__(object)}))["path"].startswith("<object")


def test_live_output_stops_the_work_on_its_first_failure() -> None:
    class Full(io.BytesIO):
        def write(self, data: object) -> int:
            raise OSError(28, "No space left on device")

    cancel = threading.Event()
    live = LiveOutput(Full(), "stdout", cancel)
    live.write(b"a")
    live.write(b"b")  # dropped, not raised
    assert cancel.is_set()
    with pytest.raises(OutputError, match="cannot write to stdout: No space left on device"):
        live.raise_failure()

    class Closed(io.BytesIO):
        def write(self, data: object) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    closed = LiveOutput(Closed(), "stdout", threading.Event())
    closed.write(b"x")
    with pytest.raises(BrokenPipeError):  # the program then exits 141
        closed.raise_failure()


def test_json_is_i_json_when_a_name_was_not_utf8() -> None:
    import json

    from trainprobe.cli._output import json_text

    name = b"model\xff.pt".decode("utf-8", "surrogateescape")
    text = json_text({"units": [{"path": name}], name: 1, "ok": "\U0001f600"})
    assert "\\udcff" not in text  # a lone surrogate escape: not I-JSON
    text.encode("utf-8")  # strict: no lone surrogate left
    data = json.loads(text)
    assert data["units"][0]["path"] == "model\\xff.pt"
    assert data["model\\xff.pt"] == 1
    assert data["ok"] == "\U0001f600"


def test_visible_escapes_controls_bidi_and_lone_surrogates() -> None:
    from trainprobe.visible import visible, visible_lines

    assert visible("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert visible("x\ny\tz\r") == "x\\ny\\tz\\r"
    assert visible("\u202etp.exe\x9b") == "\\u202etp.exe\\x9b"
    assert visible(b"a\xff".decode("utf-8", "surrogateescape")) == "a\\xff"
    assert visible_lines("one\ntwo\x1b[2K") == "one\ntwo\\x1b[2K"
    assert visible("plain ✓ text \\ kept") == "plain ✓ text \\ kept"
