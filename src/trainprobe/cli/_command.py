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
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from trainprobe.cli._where import CONFIG_HELP, CONNECT_TIMEOUT_S, PARALLEL, Remote, Where
from trainprobe.errors import UsageError


class Command(NamedTuple):
    """What a command module declares (as ``COMMAND``). Its ``run`` gets the parsed options as keyword
    arguments; with ``remote``, its --on group as one ``where`` (:class:`~trainprobe.cli._where.Where`); with
    ``reports``, its output sink as ``out`` (:class:`~trainprobe.cli._output.Output`, from --json and -q)."""

    #: what ``--help`` says after the summary line (paragraphs; an indented paragraph is kept as written)
    help: str
    #: the usage after ``trainprobe NAME``, e.g. ``PATH... [options]``
    usage: str
    add_arguments: Callable[[CommandParser], None]
    run: Callable[..., int]
    #: after the options: examples and exit codes
    epilog: str = ""
    #: the --on group (--on, --config, --timeout, --connect-timeout, --parallel); None: the command runs here
    remote: Remote | None = None
    #: the ``schema_version`` of the command's JSON document, which --json's help names (None: none)
    schema_version: int | None = None
    #: --json's help, when it is not "the JSON report (schema_version N)"
    json_help: str | None = None
    quiet_help: str = "Print nothing; only the exit code tells."
    #: False: no --json and -q (``mcp`` speaks JSON-RPC, ``demo`` tells a story), only -h
    reports: bool = True


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
        self.command = command
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

    def group(self, title: str) -> argparse._ArgumentGroup:
        """The section of the help titled ``title`` (made on first use)."""
        for group in self._action_groups:
            if group.title == title and group is not self._optionals:
                return group
        return self.add_argument_group(title)

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
    """The command's own arguments, then the groups every command shares: where it runs, and its output."""
    parser = CommandParser(name, summary, command)
    command.add_arguments(parser)
    shared = []
    if command.remote is not None:
        shared.append(_add_remote_group(parser, command.remote))
    shared.append(_add_output_group(parser, command))
    for group in shared:  # in every command's help: its own options, then where it runs, then its output
        parser._action_groups.remove(group)
        parser._action_groups.append(group)
    return parser


def _add_remote_group(parser: CommandParser, remote: Remote) -> argparse._ArgumentGroup:
    group = parser.group(remote.heading)
    own = list(group._group_actions)  # a command's own remote options (--sharded) come after the shared ones
    fleet = remote.targets == "fleet"
    if remote.on:
        group.add_argument(
            "--on", action="append", metavar="TARGET",
            help=remote.on_help + (" Repeat it, or give a range, name or group: a fleet." if fleet else ""),
        )  # fmt: skip
    group.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)
    if remote.work is not None:
        default = "no limit" if remote.timeout is None else "%(default)g"
        each = "; per target in a fleet" if fleet else ""
        group.add_argument(
            "--timeout", type=seconds, default=remote.timeout, metavar="SECONDS",
            help=f"Seconds before {remote.work} is killed{each} (default: {default}).",
        )  # fmt: skip
    group.add_argument(
        "--connect-timeout", type=seconds, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
        help="Seconds to connect, authenticate and get through login scripts (default: %(default)g).",
    )  # fmt: skip
    if fleet:
        group.add_argument(
            "--parallel", type=at_least(1), default=PARALLEL, metavar="N",
            help="A fleet: at most this many targets at once (default: %(default)s).",
        )  # fmt: skip
    for action in own:
        group._group_actions.remove(action)
        group._group_actions.append(action)
    return group


def _add_output_group(parser: CommandParser, command: Command) -> argparse._ArgumentGroup:
    group = parser.group("output" if command.reports else "options")
    if not command.reports:
        group.add_argument("-h", "--help", action="help")
        return group
    json_help = command.json_help
    if json_help is None:
        version = "" if command.schema_version is None else f" (schema_version {command.schema_version})"
        json_help = f"Print the JSON report{version} to stdout."
    group.add_argument("--json", dest="json_mode", action="store_true", help=json_help)
    group.add_argument("-q", "--quiet", action="store_true", help=command.quiet_help)
    group.add_argument("-h", "--help", action="help")
    return group


def run_command(name: str, summary: str, words: Sequence[str]) -> int:
    """Import the command's module, parse ``words`` for it and run it. A command that needs words and got
    none shows its help (on stderr: it is a usage error, exit 2)."""
    from trainprobe.cli._streams import write_stderr, write_stdout

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
    values = vars(options)
    if command.remote is not None:
        values["where"] = Where(
            on=values.pop("on", None), config=values.pop("config"), timeout=values.pop("timeout", None),
            connect_timeout=values.pop("connect_timeout"), parallel=values.pop("parallel", PARALLEL),
            task=command.remote.task,
        )  # fmt: skip
    if command.reports:
        from trainprobe.cli._output import Output

        values["out"] = Output(json_mode=values.pop("json_mode"), quiet=values.pop("quiet"))
    return command.run(**values)


# --- value types: each check fails as a usage error naming the option, before the command starts ---


def add_checkpoint_paths(parser: CommandParser) -> argparse._ArgumentGroup:
    """The PATH... of ``scan`` and ``check``, and their options group (returned, to add the command's own)."""
    parser.add_argument(
        "paths", nargs="+", metavar="PATH...", help="Checkpoint files, directories or quoted globs."
    )
    return parser.add_argument_group("options")


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
