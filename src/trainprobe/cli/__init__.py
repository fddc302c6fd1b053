"""Command-line interface: parses arguments, calls one library function, hands the result to the output sink.

Only this package imports typer and rich, and only when a command needs them: importing ``trainprobe.cli`` is
standard library only, and ``trainprobe.cli.app`` (the Typer application with every command registered) loads
on first use. ``trainprobe run TARGET SCRIPT`` on one target never loads it (see :func:`main`): typer, rich
and the command modules cost about 100 ms, more than a whole run over a reused ssh connection.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import types
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

# The order `trainprobe --help` lists them in: the whole diagnosis first, then its parts.
COMMAND_MODULES = ("triage", "scan", "check", "diff", "logs", "watch", "run", "probe", "demo")


def load_app() -> typer.Typer:
    """The Typer application with every command registered (each module registers its command on import)."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"trainprobe.cli.{name}")
    application: typer.Typer = importlib.import_module("trainprobe.cli.app").app
    return application


class _CliPackage(types.ModuleType):
    """Makes ``trainprobe.cli.app`` the Typer application, loaded on first use.

    A property, not a plain attribute: the import system binds the submodule ``trainprobe.cli.app`` to this
    name whenever it is imported, and the property ignores that (the submodule stays in ``sys.modules``).
    """

    @property
    def app(self) -> typer.Typer:
        return load_app()

    @app.setter
    def app(self, value: object) -> None:
        pass


sys.modules[__name__].__class__ = _CliPackage


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["run"]:
        code = fast_run(argv[1:])
        if code is not None:
            _exit_now(code)
    load_app()()


def _exit_now(code: int) -> None:
    """Exit without the interpreter's shutdown (module teardown, garbage collection): about 4 ms of a run
    over a reused connection. The run's files are closed and its threads done; only our streams need
    flushing, and if that fails (a closed pipe) the normal exit reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


# --- `trainprobe run` on one target, without typer and rich ------------------------------------------------

_RUN_VALUE_OPTIONS = ("--on", "--timeout", "--connect-timeout", "--need", "--parallel", "--config")
_RUN_FLAGS = {"--json": "json", "--quiet": "quiet", "-q": "quiet"}


def parse_run_args(argv: Sequence[str]) -> dict[str, Any] | None:
    """The options of ``trainprobe run`` as the Typer command reads them, or None for anything this small
    parser does not handle exactly like it (help, an unknown or malformed option, a bad number, a missing
    TARGET or SCRIPT): the Typer command then parses the line and explains the problem."""
    values: dict[str, Any] = {"on": [], "json": False, "quiet": False}
    words: list[str] = []
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if word == "--":
            words.extend(rest)
            break
        if word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
        elif word in _RUN_VALUE_OPTIONS:
            if not rest or rest[0].startswith("-"):
                return None
            name, value = word, rest.pop(0)
        elif word in _RUN_FLAGS:
            values[_RUN_FLAGS[word]] = True
            continue
        elif word.startswith("-") and word != "-":
            return None
        else:
            words.append(word)
            continue
        if name not in _RUN_VALUE_OPTIONS:
            return None
        if name == "--on":
            values["on"].append(value)
        else:
            values[name[2:].replace("-", "_")] = value
    try:
        timeout = float(values["timeout"]) if "timeout" in values else None
        connect_timeout = float(values.get("connect_timeout", 10.0))
        if int(values.get("parallel", 32)) < 1:
            return None
    except ValueError:
        return None
    if len(words) < (1 if values["on"] else 2):
        return None
    specs = values["on"] or words[:1]
    words = words[len(specs) :] if not values["on"] else words
    need = tuple(n.strip() for n in values.get("need", "").split(",") if n.strip())
    return {
        "specs": specs, "script": words[0], "args": words[1:], "timeout": timeout,
        "connect_timeout": connect_timeout, "need": need, "config": values.get("config"),
        "json_mode": values["json"], "quiet": values["quiet"],
    }  # fmt: skip


def fast_run(argv: Sequence[str]) -> int | None:
    """``trainprobe run`` for one target, or None when the Typer command must handle the line: a fleet, help,
    a usage problem (whose message the Typer command words), anything :func:`parse_run_args` declines."""
    options = parse_run_args(argv)
    if options is None or not os.path.isfile(options["script"]):
        return None
    from trainprobe.errors import TrainprobeError
    from trainprobe.remote.fleet import expand_targets, load_config

    try:
        targets = expand_targets(options["specs"], load_config(options["config"]))
    except TrainprobeError:
        return None
    if len(targets) != 1 or "slurm=" in targets[0]:  # a fleet (a Slurm job fans out to its nodes)
        return None
    return run_single(
        targets[0], options["script"], options["args"], timeout=options["timeout"],
        connect_timeout=options["connect_timeout"], need=options["need"], json_mode=options["json_mode"],
        quiet=options["quiet"],
    )  # fmt: skip


def _styled(stream: IO[str], style: str, text: str) -> str:
    colour = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return f"\x1b[{style}m{text}\x1b[0m" if colour else text


def run_single(
    target: str,
    script: str,
    args: Sequence[str],
    *,
    timeout: float | None,
    connect_timeout: float,
    need: Sequence[str],
    json_mode: bool,
    quiet: bool,
) -> int:
    """One run, printed: live output (to stderr under ``--json``), the JSON document, one error line, where
    the log is. The one implementation behind ``trainprobe run`` on a single target, with or without Typer.
    Returns the exit code."""
    from trainprobe.errors import TrainprobeError
    from trainprobe.remote import run

    def sink(stream: IO[bytes] | None) -> Any:
        if stream is None:
            return None

        def write(data: bytes) -> None:
            stream.write(data)
            stream.flush()

        return write

    def error(message: str) -> None:
        sys.stderr.write(f"{_styled(sys.stderr, '1;31', 'error:')} {message}\n")
        sys.stderr.flush()

    try:
        result = run(
            target,
            script,
            list(args),
            timeout=timeout,
            connect_timeout=connect_timeout,
            need=need,
            stdout=sink(None if quiet else (sys.stderr.buffer if json_mode else sys.stdout.buffer)),
            stderr=sink(None if quiet else sys.stderr.buffer),
        )
    except TrainprobeError as exc:
        if os.environ.get("TRAINPROBE_DEBUG"):
            raise
        error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    if json_mode:
        data = result.to_json()
        data["stdout_log"] = str(result.stdout_path)
        data["stderr_log"] = str(result.stderr_path)
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str, allow_nan=False) + "\n")
        sys.stdout.flush()
    if result.error is not None:
        error(str(result.error))
    if not quiet:  # never wrapped: people copy the path
        sys.stderr.write(_styled(sys.stderr, "2", f"log: {result.log_dir}") + "\n")
        sys.stderr.flush()
    return result.exit_code


__all__ = ["app", "fast_run", "load_app", "main", "parse_run_args", "run_single"]
