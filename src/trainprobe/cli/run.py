"""`trainprobe run`: a local Python script on a far target or a fleet of them, live output, full logs kept.

Library imports stay inside the functions: ``trainprobe --help`` and a single run start faster.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._fleet import (
    CONFIG_HELP,
    FLEET_HELP,
    PARALLEL_HELP,
    TARGET_HELP,
    expand_specs,
    is_fleet,
    live_reporter,
    render_fleet,
)
from trainprobe.cli._output import Output
from trainprobe.cli.app import app

RUN_HELP = (
    "Run a local Python script on TARGET: no quoting, live output, hard timeout, nothing left running.\n\n"
    "The script, its arguments and any modules travel over stdin; it runs as __main__ with sys.argv set "
    "from the arguments after --. A main() that returns a JSON-serialisable value sends it back as the "
    "result (--json shows it). Remote tracebacks show the local path. The full stdout, stderr, result and "
    "metadata are kept under $XDG_STATE_HOME/trainprobe/runs/ (default ~/.local/state/trainprobe/runs/); "
    "the path is printed at the end.\n\n"
    f"{TARGET_HELP}\n\n{FLEET_HELP}\n\n"
    "\b\nExamples:\n"
    "  trainprobe run ssh=root@10.1.2.6 check_ckpt.py -- /ckpts --step 4000\n"
    "  trainprobe run 'ssh=root@10.1.2.6//venv=/root/venv' check_ckpt.py -- /ckpts\n"
    "  trainprobe run ssh=gpu07 --need torch,numpy probe_grads.py\n"
    "  trainprobe run 'ssh=bastion//ssh=gpu07//sudo//cd=/data' du.py --timeout 60\n"
    "  trainprobe run 'ssh=node[01-16]//docker=trainer' check_ckpt.py --timeout 600 -- /ckpts\n"
    "  trainprobe run --on ssh=gpu01 --on trainers check_ckpt.py --json\n\n"
    "Exit codes, one target: the script's own exit code (1 for an uncaught exception); 124 timed out; 127 no "
    "interpreter (with the needed modules); 130 interrupted; 255 unreachable, authentication refused, "
    "container/pod/job not there or connection lost; 2 a bad target or flag.  A fleet: 0 every target "
    "ran and exited 0; 1 any target failed (its own code is in the table); 2 a bad target, name or flag."
)


def _split_words(words: Sequence[str], on: Sequence[str]) -> tuple[list[str], str, list[str]]:
    """(target specs, script, script arguments) from the positional words and the --on options."""
    from trainprobe.errors import UsageError

    words = list(words)
    specs = list(on)
    if not specs:
        if not words:
            raise UsageError("missing TARGET and SCRIPT", hint="e.g. trainprobe run ssh=gpu07 check.py")
        specs.append(words.pop(0))
    elif len(words) > 1 and not Path(words[0]).is_file() and Path(words[1]).is_file():
        raise UsageError(
            f"{words[0]} looks like a target, but with --on every target is given with --on",
            hint=f"trainprobe run --on {words[0]} --on {specs[0]} ... {words[1]}",
        )
    if not words:
        raise UsageError(
            "missing SCRIPT (a local Python file)", hint="e.g. trainprobe run ssh=gpu07 check.py"
        )
    return specs, words[0], words[1:]


@app.command("run", help=RUN_HELP, no_args_is_help=True)
def run_command(
    words: list[str] = typer.Argument(
        ...,
        metavar="TARGET SCRIPT [-- ARGS...]",
        help="Where to run (leave out with --on), a local Python script, and arguments for it after --.",
        show_default=False,
    ),
    on: list[str] | None = typer.Option(
        None,
        "--on",
        metavar="TARGET",
        help="A target, range, name or group; repeat for a fleet (no TARGET then).",
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds before the run is killed (all of it; per target in a fleet)."
    ),
    connect_timeout: float = typer.Option(
        10.0, "--connect-timeout", help="Seconds to connect, authenticate and get through login scripts."
    ),
    need: str | None = typer.Option(
        None, "--need", help="Modules the interpreter must have, e.g. torch,numpy."
    ),
    parallel: int = typer.Option(32, "--parallel", min=1, help=PARALLEL_HELP),
    config: Path | None = typer.Option(None, "--config", metavar="FILE", help=CONFIG_HELP),
    json_mode: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON document (exit code, result, log paths); live output goes to stderr.",
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No live output and no notes; logs are still kept."
    ),
) -> None:
    from trainprobe.errors import UsageError

    out = Output(json_mode=json_mode, quiet=quiet)
    with reported_errors(out):
        specs, script_word, args = _split_words(words, on or [])
        script = Path(script_word)
        if not script.is_file():
            raise UsageError(f"script {script} is not a readable file")
        targets = expand_specs(specs, config)
        live_out = None if quiet else (sys.stderr.buffer if json_mode else sys.stdout.buffer)
        live_err = None if quiet else sys.stderr.buffer
        needed = tuple(n.strip() for n in (need or "").split(",") if n.strip())
        if is_fleet(targets):
            from trainprobe.remote.fanout import run_fleet

            on_output, on_plan, on_done = live_reporter(targets, live_out, live_err)
            fleet = run_fleet(
                targets,
                str(script),
                args,
                parallel=parallel,
                timeout=timeout,
                connect_timeout=connect_timeout,
                need=needed,
                on_output=on_output,
                on_plan=on_plan,
                on_done=on_done,
            )
            out.result(fleet.to_json(), lambda console: render_fleet(console, fleet))
            code = fleet.exit_code
        else:
            from trainprobe.cli import run_single  # the same code as the fast path in cli.main

            code = run_single(
                targets[0], script_word, args, timeout=timeout, connect_timeout=connect_timeout, need=needed,
                json_mode=json_mode, quiet=quiet,
            )  # fmt: skip
    raise typer.Exit(code)
