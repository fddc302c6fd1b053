"""Command-line interface: parses arguments, calls one library function, hands the result to the output sink.

Lean start: an agent calls the CLI dozens of times per diagnosis, so each call imports only what its command
needs (``tests/cli/test_import_budget.py`` names what each must not import; ``benchmarks/scan.py`` times it).

- The dispatcher (:func:`main`) knows the command names and summaries (:data:`COMMANDS`) without importing
  any command module; ``--version`` imports nothing but this package and :mod:`~trainprobe.cli._errors`.
- The chosen command's module alone is imported; it builds its argparse parser
  (:mod:`~trainprobe.cli._command`) and checks values as argument types, so a usage error is reported before
  any library is imported. The library modules a command calls are imported inside its function.
- Output that does not go to a terminal is plain text and never imports rich; on a terminal, markup is
  styled by us and rich only draws tables and progress bars (:mod:`~trainprobe.cli._output`).
- numpy comes only with the library code that reads tensors or series (``scan``, ``check``, ``diff``,
  ``logs``, ``watch``, ``triage``); never for ``run``, ``probe``, help or a usage error.
- ``trainprobe run`` has one implementation, :mod:`trainprobe.cli.run`, which imports neither rich, numpy
  nor dataclasses for a single target (``tests/remote/test_import_time.py``).
- The program ends without the interpreter's teardown (:func:`~trainprobe.cli._errors.skip_teardown`).

How a command ends — its exit code, one error line, 141 when its output is closed, 130 on Ctrl-C — is
decided in :mod:`trainprobe.cli._errors`.
"""

from __future__ import annotations

import sys

# Not typing.TYPE_CHECKING: importing typing (it imports re, collections, contextlib) costs more than the
# rest of `trainprobe --version`, which imports nothing but this package and cli._errors.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

#: every command and its one-line summary, in the order ``trainprobe --help`` lists them (the whole
#: diagnosis first, then its parts); each is ``trainprobe.cli.<name>``, imported only when it runs
COMMANDS = {
    "triage": "The whole diagnosis of one run in one command: what went wrong, when, why, and which "
    "checkpoint to resume from.",
    "scan": "Find NaN/+Inf/−Inf in checkpoints: weights and optimizer state, without torch and without "
    "executing the file.",
    "check": "Is each checkpoint one consistent snapshot? A verdict per checkpoint with the evidence that "
    "decided it.",
    "diff": "What changed between two checkpoints A and B, tensor by tensor, without torch.",
    "logs": "Find loss spikes, accuracy cliffs, stalls, NaN/Inf and missing values in training logs, each "
    "tied to the event before it.",
    "watch": "Follow a growing training log like `tail -F` and print each new finding as it appears.",
    "run": "Run a local Python script on TARGET: no quoting, live output, hard timeout, nothing left "
    "running.",
    "probe": "Show what is on TARGET: Pythons (numpy, torch, CUDA), GPUs, disk, load, memory and training "
    "processes.",
    "mcp": "Serve trainprobe's tools to an AI agent over the Model Context Protocol (stdio).",
    "demo": "The seed's story on your CPU in well under two minutes, and `trainprobe triage` telling it.",
}

_DESCRIPTION = """\
Debug ML training runs at a distance.

scan: find NaN/Inf in checkpoints without torch.  check/diff: torn snapshots and what changed.
run/probe: run a local Python script on a far target through ssh, containers and venvs.
logs/watch: spikes, cliffs, stalls and NaN in training logs.  triage: all of it on one run."""

_EPILOG = """\
Run 'trainprobe COMMAND --help' for a command's options, examples and exit codes.

Exit codes: 0 healthy, 1 findings or a failed run, 2 usage error or unreadable input, 3 trainprobe itself
failed (a bug: one line names it and where its traceback was kept); 141 when the output was closed (| head),
130 when interrupted. 'trainprobe --debug COMMAND ...' (or TRAINPROBE_DEBUG=1) shows the traceback with an
error."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` and return its exit code. Without ``argv`` this is the program
    (``sys.argv[1:]``: the ``trainprobe`` script, ``python -m trainprobe``), which then exits without the
    interpreter's teardown (:func:`~trainprobe.cli._errors.skip_teardown`)."""
    from trainprobe.cli._errors import guarded, skip_teardown

    record_exit_code = skip_teardown() if argv is None else None
    words = list(sys.argv[1:] if argv is None else argv)
    code = guarded(lambda: _dispatch(words))
    if record_exit_code is not None:
        record_exit_code(code)
    return code


def _dispatch(words: list[str]) -> int:
    from trainprobe.cli._streams import write_stderr, write_stdout

    if words and words[0] == "--debug":  # before the command: every exception with its traceback
        import os

        os.environ["TRAINPROBE_DEBUG"] = "1"
        words = words[1:]
    first = words[0] if words else None
    if first is None:
        write_stderr(top_help())
        return 2
    if first in ("-h", "--help"):
        write_stdout(top_help())
        return 0
    if first == "--version":
        from trainprobe import __version__

        write_stdout(f"trainprobe {__version__}\n")
        return 0
    if first not in COMMANDS:
        from trainprobe.errors import UsageError

        what = "option" if first.startswith("-") else "command"
        raise UsageError(f"no such {what}: {first}", hint=_suggestion(first))
    from trainprobe.cli._command import run_command
    from trainprobe.cli._errors import EXIT_INTERNAL_ERROR, watch_threads

    crashed = watch_threads()
    code = run_command(first, COMMANDS[first], words[1:])
    # a worker thread that died of an exception (a fleet's reader, a progress reporter) left its part of the
    # answer out: the command did not finish, whatever its own code says
    return EXIT_INTERNAL_ERROR if crashed and code in (0, 1) else code


def _suggestion(word: str) -> str:
    import difflib

    close = difflib.get_close_matches(word.lstrip("-"), COMMANDS, n=1)
    if close:
        return f"did you mean 'trainprobe {close[0]}'? (see 'trainprobe --help')"
    return f"the commands are {', '.join(COMMANDS)} (see 'trainprobe --help')"


def top_help() -> str:
    """``trainprobe --help``: what the tool is, every command with its summary, the exit codes."""
    from trainprobe.cli._command import fill, help_width

    width = help_width()
    name_width = max(len(name) for name in COMMANDS) + 2
    lines = ["usage: trainprobe [--debug] COMMAND [options] ...", "       trainprobe --version", ""]
    lines += [_DESCRIPTION, "", "commands:"]  # as written: its lines pair the commands
    for name, summary in COMMANDS.items():
        text = fill(summary, width - name_width - 2).split("\n")
        lines.append(f"  {name:<{name_width}}{text[0]}")
        lines += [" " * (name_width + 2) + rest for rest in text[1:]]
    lines += ["", "options:", "  -h, --help    Show this help and exit.", "  --version     Show the version."]
    lines += ["  --debug       Show the traceback with an error (before the command)."]
    lines += ["", fill(_EPILOG, width), ""]
    return "\n".join(lines)


__all__ = ["COMMANDS", "main"]
