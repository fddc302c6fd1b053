"""The command layer: one argparse parser per command, built only for the command that runs.

A command module declares ``COMMAND = Command(...)``: its help (the summary comes from
:data:`trainprobe.cli.COMMANDS`), usage, examples and exit codes, a function that adds its arguments, and the
function that runs it with the parsed options as keyword arguments and returns the exit code. Options may
come anywhere among the positional words; everything after ``--`` is positional.

A usage error is one :class:`~trainprobe.errors.UsageError` (exit 2) that names the option and points at
``--help``; value checks (a number of seconds, a count) are argument types here, so they fail before the
command imports anything.
"""

from __future__ import annotations

import argparse
import importlib
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from trainprobe.errors import UsageError


class Command(NamedTuple):
    """What a command module declares (as ``COMMAND``)."""

    #: what ``--help`` says after the summary line (paragraphs; an indented paragraph is kept as written)
    help: str
    #: the usage after ``trainprobe NAME``, e.g. ``PATH... [options]``
    usage: str
    add_arguments: Callable[[CommandParser], None]
    run: Callable[..., int]
    #: after the options: examples and exit codes
    epilog: str = ""


class HelpRequested(Exception):
    """-h/--help was given: print the help, exit 0."""


class _HelpAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, help="Show this help and exit.")

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise HelpRequested


class CommandParser(argparse.ArgumentParser):
    """argparse with trainprobe's help layout and one-line usage errors."""

    def __init__(self, name: str, summary: str, command: Command) -> None:
        self.command_name = name
        super().__init__(
            prog=f"trainprobe {name}",
            usage=f"trainprobe {name} {command.usage}",
            description=f"{summary}\n\n{command.help}".strip(),
            epilog=command.epilog or None,
            formatter_class=HelpFormatter,
            add_help=False,
            allow_abbrev=False,
        )
        self.register("action", "help", _HelpAction)
        self._arguments_group = self.add_argument_group("arguments")

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        """As argparse's; a positional argument goes to the "arguments" section of the help."""
        if names and not names[0].startswith("-"):
            return self._arguments_group.add_argument(*names, **kwargs)
        return super().add_argument(*names, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(
            f"{self.command_name}: {_reworded(message)}", hint=f"see 'trainprobe {self.command_name} --help'"
        )


def _reworded(message: str) -> str:
    """argparse's messages in trainprobe's words (the option first, what is wrong with it after)."""
    extra = re.fullmatch(r"unrecognized arguments: (.*)", message)
    if extra:
        words = extra.group(1).split()
        options = [w for w in words if w.startswith("-")]
        if options:
            return f"no such option: {options[0]}"
        return f"unexpected argument{'s' if len(words) > 1 else ''}: {extra.group(1)}"
    return re.sub(r"^argument (\S+?)(?:/\S+)?: ", r"\1: ", message)


class HelpFormatter(argparse.HelpFormatter):
    """Options aligned in one column; description and epilog filled by :func:`fill` to the same width."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=help_width())

    def _fill_text(self, text: str, width: int, indent: str) -> str:  # argparse's hook for both texts
        return fill(text, width)


def help_width() -> int:
    import shutil

    return max(40, min(shutil.get_terminal_size().columns - 2, 100))


def fill(text: str, width: int) -> str:
    """Paragraphs (apart by blank lines) filled to ``width``; a paragraph with an indented line (examples,
    tables) is kept as written."""
    import textwrap

    paragraphs = []
    for paragraph in text.strip("\n").split("\n\n"):
        lines = paragraph.split("\n")
        if any(line.startswith(" ") for line in lines):
            paragraphs.append(paragraph)
        else:
            paragraphs.append(textwrap.fill(" ".join(lines), width, break_on_hyphens=False))
    return "\n\n".join(paragraphs)


def build_parser(name: str, summary: str, command: Command) -> CommandParser:
    parser = CommandParser(name, summary, command)
    command.add_arguments(parser)
    return parser


def run_command(name: str, summary: str, words: Sequence[str]) -> int:
    """Import the command's module, parse ``words`` for it and run it. A command that needs words and got
    none shows its help (on stderr: it is a usage error, exit 2)."""
    from trainprobe.cli._errors import write_stderr, write_stdout

    command: Command = importlib.import_module(f"trainprobe.cli.{name}").COMMAND
    parser = build_parser(name, summary, command)
    try:
        options = parser.parse_intermixed_args(list(words))
    except HelpRequested:
        write_stdout(parser.format_help())
        return 0
    except UsageError:
        if words:
            raise
        write_stderr(parser.format_help())
        return 2
    return command.run(**vars(options))


def add_output_options(
    group: Any,
    *,
    json_help: str = "Print the JSON report (schema_version 1) to stdout.",
    quiet_help: str | None = "Print nothing; only the exit code tells.",
) -> None:
    """--json (as ``json_mode``), -q/--quiet (unless ``quiet_help`` is None) and -h/--help."""
    group.add_argument("--json", dest="json_mode", action="store_true", help=json_help)
    if quiet_help is not None:
        group.add_argument("-q", "--quiet", action="store_true", help=quiet_help)
    group.add_argument("-h", "--help", action="help")


# --- value types: each check fails as a usage error naming the option, before the command starts ---


def seconds(text: str) -> float:
    """A number of seconds > 0 (a timeout, an interval): not NaN, not infinite, not negative or zero."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def non_negative_seconds(text: str) -> float:
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def positive_number(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def at_least(minimum: int) -> Callable[[str], int]:
    """A whole number >= ``minimum``."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is less than {minimum}")
        return value

    convert.__name__ = f"at_least_{minimum}"
    return convert


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value
