"""`trainprobe run`: a local Python script on a far target, live output, full logs kept."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from trainprobe.cli._errors import reported_errors
from trainprobe.cli._output import Output
from trainprobe.cli.app import app

TARGET_HELP = (
    "\b\nTARGET is one string of //-separated hops, outermost first:\n"
    "  local                             this machine\n"
    "  ssh=user@host:port                OpenSSH; user@ and :port optional (~/.ssh/config applies)\n"
    "  ssh=bastion//ssh=gpu07            through a jump host (ProxyJump)\n"
    "  sudo  or  sudo=USER               non-interactive sudo (sudo -n)\n"
    "  python=PATH  venv=DIR  conda=ENV  the interpreter (default: discovered on the far side)\n"
    "  cd=DIR  env=NAME=VALUE            working directory and environment of the script\n\n"
    "Without python=/venv=/conda=, the far side picks the first of: $VIRTUAL_ENV, $CONDA_PREFIX, venvs "
    "under home directories, /root and /opt, conda envs, interpreters of running Python processes, "
    "python3/python on PATH; --need picks the first of those that has the modules."
)

RUN_HELP = (
    "Run a local Python script on TARGET: no quoting, live output, hard timeout, nothing left running.\n\n"
    "The script, its arguments and any modules travel over stdin; it runs as __main__ with sys.argv set "
    "from the arguments after --. A main() that returns a JSON-serialisable value sends it back as the "
    "result (--json shows it). Remote tracebacks show the local path. The full stdout, stderr, result and "
    "metadata are kept under $XDG_STATE_HOME/trainprobe/runs/ (default ~/.local/state/trainprobe/runs/); "
    "the path is printed at the end.\n\n"
    f"{TARGET_HELP}\n\n"
    "\b\nExamples:\n"
    "  trainprobe run ssh=root@10.1.2.6 check_ckpt.py -- /ckpts --step 4000\n"
    "  trainprobe run 'ssh=root@10.1.2.6//venv=/root/venv' check_ckpt.py -- /ckpts\n"
    "  trainprobe run ssh=gpu07 --need torch,numpy probe_grads.py\n"
    "  trainprobe run 'ssh=bastion//ssh=gpu07//sudo//cd=/data' du.py --timeout 60\n\n"
    "Exit codes: the script's own exit code (1 for an uncaught exception); 124 timed out; 127 no interpreter "
    "(with the needed modules); 130 interrupted; 255 unreachable, authentication refused or connection lost; "
    "2 a bad target or flag."
)


@app.command("run", help=RUN_HELP, no_args_is_help=True)
def run_command(
    target: str = typer.Argument(
        ..., metavar="TARGET", help="Where to run, e.g. ssh=user@host//venv=/opt/venv."
    ),
    script: Path = typer.Argument(..., metavar="SCRIPT", help="A local Python script.", dir_okay=False),
    args: list[str] | None = typer.Argument(None, metavar="[-- ARGS...]", help="Arguments for the script."),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds before the run is killed (all of it)."
    ),
    connect_timeout: float = typer.Option(
        10.0, "--connect-timeout", help="Seconds to connect, authenticate and get through login scripts."
    ),
    need: str | None = typer.Option(
        None, "--need", help="Modules the interpreter must have, e.g. torch,numpy."
    ),
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
    from trainprobe.remote import run

    out = Output(json_mode=json_mode, quiet=quiet)
    with reported_errors(out):
        if not script.is_file():
            raise UsageError(f"script {script} is not a readable file")
        live_out = None if quiet else (sys.stderr.buffer if json_mode else sys.stdout.buffer)
        live_err = None if quiet else sys.stderr.buffer

        def sink(stream: object) -> object:
            if stream is None:
                return None

            def write(data: bytes) -> None:
                stream.write(data)  # type: ignore[attr-defined]
                stream.flush()  # type: ignore[attr-defined]

            return write

        needed = tuple(n.strip() for n in (need or "").split(",") if n.strip())
        result = run(
            target,
            script,
            list(args or []),
            timeout=timeout,
            connect_timeout=connect_timeout,
            need=needed,
            stdout=sink(live_out),  # type: ignore[arg-type]
            stderr=sink(live_err),  # type: ignore[arg-type]
        )
        data = result.to_json()
        data["stdout_log"] = str(result.stdout_path)
        data["stderr_log"] = str(result.stderr_path)
        out.result(data, lambda console: None)
        if result.error is not None:
            out.error(str(result.error))
        if not quiet:  # never wrapped: people copy the path
            out.err.print(
                f"log: {result.log_dir}", soft_wrap=True, markup=False, highlight=False, style="dim"
            )
    raise typer.Exit(result.exit_code)
