"""`trainprobe run`: a local Python script on a far target or a fleet of them, live output, full logs kept.

The one implementation of ``trainprobe run``, single target or fleet. A single run is the path an agent
pays for on every call, so this module and what it imports stay light: no numpy, no rich unless a fleet's
table is drawn on a terminal, no dataclasses (``tests/remote/test_import_time.py``); library imports stay
inside the functions.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from trainprobe.cli._command import Command, CommandParser
from trainprobe.cli._fleet import FLEET_HELP, TARGET_HELP, live_reporter, render_fleet
from trainprobe.cli._output import Output
from trainprobe.cli._plain import escape
from trainprobe.cli._where import Remote, Where, is_fleet
from trainprobe.errors import UsageError

TYPE_CHECKING = False  # not typing's: a single run imports no typing (tests/remote/test_import_time.py)
if TYPE_CHECKING:
    from trainprobe.remote.target import Target

RUN_HELP = (
    "The script, its arguments and any modules travel over stdin; it runs as __main__ with sys.argv set "
    "from the arguments after --. A main() that returns a JSON-serialisable value sends it back as the "
    "result (--json shows it). Remote tracebacks show the local path. The full stdout, stderr, result and "
    "metadata are kept under $XDG_STATE_HOME/trainprobe/runs/ (default ~/.local/state/trainprobe/runs/); "
    "the path is printed at the end.\n\n"
    f"{TARGET_HELP}\n\n{FLEET_HELP}"
)

RUN_EPILOG = (
    "examples:\n"
    "  trainprobe run ssh=root@10.1.2.6 check_ckpt.py -- /ckpts --step 4000\n"
    "  trainprobe run 'ssh=root@10.1.2.6//venv=/root/venv' check_ckpt.py -- /ckpts\n"
    "  trainprobe run ssh=gpu07 --need torch,numpy probe_grads.py\n"
    "  trainprobe run 'ssh=bastion//ssh=gpu07//sudo//cd=/data' du.py --timeout 60\n"
    "  trainprobe run 'ssh=node[01-16]//docker=trainer' check_ckpt.py --timeout 600 -- /ckpts\n"
    "  trainprobe run --on ssh=gpu01 --on trainers check_ckpt.py --json\n\n"
    "Exit codes, one target: the script's own exit code (1 for an uncaught exception); 124 timed out; 127 no "
    "interpreter (with the needed modules); 130 interrupted; 255 unreachable, authentication refused, "
    "container/pod/job not there or connection lost; 2 a bad target or flag; 141 the output was closed, e.g. "
    "by head (the run is stopped). A fleet: 0 every target ran and exited 0; 1 any target failed (its own "
    "code is in the table); 2 a bad target, name or flag."
)


def _split_words(words: Sequence[str], on: Sequence[str]) -> tuple[list[str], str, list[str]]:
    """(target specs, script, script arguments) from the positional words and the --on options."""
    words = list(words)
    specs = list(on)
    if not specs:
        if not words:
            raise UsageError("missing TARGET and SCRIPT", hint="e.g. trainprobe run ssh=gpu07 check.py")
        specs.append(words.pop(0))
    elif len(words) > 1 and not os.path.isfile(words[0]) and os.path.isfile(words[1]):
        raise UsageError(
            f"{words[0]} looks like a target, but with --on every target is given with --on",
            hint=f"trainprobe run --on {words[0]} --on {specs[0]} ... {words[1]}",
        )
    if not words:
        raise UsageError(
            "missing SCRIPT (a local Python file)", hint="e.g. trainprobe run ssh=gpu07 check.py"
        )
    return specs, words[0], words[1:]


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "words", nargs="+", metavar="TARGET SCRIPT [-- ARGS...]",
        help="Where to run (leave out with --on), a local Python script, and arguments for it after --.",
    )  # fmt: skip
    parser.add_argument_group("options").add_argument(
        "--need", metavar="MODULES", help="Modules the interpreter must have, e.g. torch,numpy."
    )


def run_command(words: list[str], *, need: str | None, out: Output, where: Where) -> int:
    specs, script, args = _split_words(words, where.on or [])
    if not os.path.isfile(script):
        raise UsageError(f"script {script} is not a readable file")
    targets = where.targets(specs)
    needed = tuple(n.strip() for n in (need or "").split(",") if n.strip())
    if not is_fleet(targets):
        return run_single(out, targets[0], script, args, need=needed, **where.limits())
    from trainprobe.remote.fanout import run_fleet

    live = LiveStreams(out)
    on_output, on_plan, on_done = live_reporter([str(t) for t in targets], live.stdout, live.stderr)
    fleet = run_fleet(
        targets, script, args, need=needed, on_output=on_output, on_plan=on_plan, on_done=on_done,
        cancel=live.cancel, **where.fleet_limits(),
    )  # fmt: skip
    live.raise_failure()
    out.result(fleet.to_json(), lambda console: render_fleet(console, fleet))
    return fleet.exit_code


def run_single(
    out: Output,
    target: Target,
    script: str,
    args: Sequence[str],
    *,
    timeout: float | None,
    connect_timeout: float,
    need: Sequence[str],
) -> int:
    """One run, printed: live output (to stderr under ``--json``), the JSON document, one error line, where
    the log is. Returns the exit code. A closed or full stdout stops the run (the far side is killed)."""
    from trainprobe.remote import run

    live = LiveStreams(out)
    result = run(
        target,
        script,
        list(args),
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=need,
        stdout=live.stdout,
        stderr=live.stderr,
        cancel=live.cancel,
    )
    live.raise_failure()
    if out.json_mode:
        data = result.to_json()
        data["stdout_log"] = str(result.stdout_path)
        data["stderr_log"] = str(result.stderr_path)
        out.json(data)
    if result.error is not None:
        out.error(str(result.error))
    out.note(f"[dim]log: {escape(str(result.log_dir))}[/]", markup=True)  # one line: people copy the path
    return result.exit_code


class LiveStreams:
    """Where a run's live output goes: ``stdout`` (stderr under ``--json``: stdout holds the document) and
    ``stderr``, none with ``-q``. The first write that fails (``| head`` exited, a full disk) sets ``cancel``,
    which stops the run; :meth:`raise_failure` then ends the command the way that write would have."""

    def __init__(self, out: Output) -> None:
        self.cancel = threading.Event()
        self.stdout = None if out.quiet else out.live(self.cancel, stderr=out.json_mode)
        self.stderr = None if out.quiet else out.live(self.cancel, stderr=True)

    def raise_failure(self) -> None:
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.raise_failure()


COMMAND = Command(
    RUN_HELP, "TARGET SCRIPT [options] [-- ARGS...]", add_arguments, run_command, RUN_EPILOG,
    remote=Remote(
        "fleet", "Where to run (no TARGET word then).", "the run",
        timeout=None, heading="where it runs",
    ),
    json_help="Print one JSON document (exit code, result, log paths); live output goes to stderr.",
    quiet_help="No live output and no notes; logs are still kept.",
)  # fmt: skip
