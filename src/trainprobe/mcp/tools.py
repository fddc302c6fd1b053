"""The one place the MCP tools reach the library: each function returns the JSON document that its command's
``--json`` prints, computed where the files are.

Every call goes through the remote engine, the local default too (``local//python=<this interpreter>``):
the engine's timeout kills the work when it runs over (a thread of the server could not be stopped), a crash
or a large memory map stays in a child process, and the engine keeps the full output in the runs directory.

What each tool calls (repoint here when the library's entry points change):

=============  ==========================================================================================
triage         ``trainprobe.tasks.triage_on`` (``trainprobe.triage.collect`` far side, concluded here)
scan           ``trainprobe.tasks.scan_on`` (``trainprobe.checkpoint.scan`` far side)
check          ``trainprobe.tasks.check_on`` (``trainprobe.checkpoint.check.check_paths_json``)
diff           ``trainprobe.tasks.diff_on`` (``trainprobe.checkpoint.diff.diff_paths_json`` far side)
logs           ``trainprobe.tasks.logs_on`` (``trainprobe.metrics.analyze.analyze_json`` far side)
probe          ``trainprobe.remote.probe.probe`` / ``probe_fleet``
run            ``trainprobe.remote.run`` / ``trainprobe.remote.fanout.run_fleet``
watch_tail     ``trainprobe.tasks.tail.tail_on`` (``trainprobe.metrics.follow.tail_findings`` far side)
=============  ==========================================================================================

Its top level imports only the standard library and ``trainprobe.errors``: the server starts without
numpy, and each tool imports what it calls.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar

from trainprobe.errors import RemoteExceptionError, TrainprobeError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from trainprobe.remote.target import Target

LOCAL = "local"
R = TypeVar("R")


class Place(NamedTuple):
    """Where a tool's work runs: ``engine`` is the target the engine gets; ``label`` is the target the user
    named (None for this machine, as the CLI without ``--on``), which reports and messages show."""

    engine: str
    label: str | None


def targets_of(target: str) -> list[Target]:
    """The targets ``target`` names: one, or a fleet (a range, a group of the targets file), resolved as every
    command's ``--on`` is (:func:`trainprobe.remote.fleet.resolve`). ``local`` (or blank) is this machine,
    as the CLI without ``--on``: the targets file is not read for it."""
    from trainprobe.remote import parse_target
    from trainprobe.remote.fleet import resolve

    if target.strip() in ("", LOCAL):
        return [parse_target(LOCAL)]
    return resolve([target])


INTERPRETER_SETTINGS = ("python", "venv", "conda", "env")


def interpreter_settings(target: str) -> list[str]:
    """The interpreter settings (``python=``, ``venv=``, ``conda=``, ``env=``) the client wrote in ``target``,
    each hop once, in order: those of every target a range expands to. A name from the targets file (a
    target or a group) is the user's own configuration and names none here."""
    from trainprobe.remote.fleet import load_config, resolve

    spec = target.strip()
    if spec in ("", LOCAL):
        return []
    config = load_config(None)
    if spec in config.targets or spec in config.groups:
        return []
    found: list[str] = []
    for one in resolve([spec], config):
        for hop in one.hops:
            if hop.kind in INTERPRETER_SETTINGS and hop.spec() not in found:
                found.append(hop.spec())
    return found


def place(target: str, tool: str) -> Place:
    """The one target a single-target tool runs on; a fleet is a usage error naming the way out."""
    from trainprobe.remote.fanout import needs_fleet

    targets = targets_of(target)
    if needs_fleet(targets):
        raise UsageError(
            f"{target}: names {len(targets)} targets, and {tool} takes one",
            hint="call it once per target (run and probe take fleets)",
        )
    return place_of(targets[0])


def place_of(target: Target) -> Place:
    """Where one target (from :func:`targets_of`) runs, and how it is shown."""
    shown = str(target)
    return Place(engine_target(shown), None if shown == LOCAL else shown)


def engine_target(target: str) -> str:
    """``target``, with this server's own interpreter when it runs here and names none: local discovery
    would take the first venv it finds, which may lack numpy or be an old Python."""
    from trainprobe.remote import parse_target

    parsed = parse_target(target)
    settings = parsed.settings
    remote = any(hop.kind != LOCAL for hop in parsed.wrapping)
    if remote or settings.python or settings.venv or settings.conda:
        return str(parsed)
    return str(parse_target(f"{parsed}//python={sys.executable}"))


@contextmanager
def presented(where: Place) -> Iterator[None]:
    """Errors worded as the CLI words them (see :func:`shown_message`)."""
    try:
        yield
    except TrainprobeError as exc:
        raise TrainprobeError(shown_message(exc, where)) from None


def shown_message(exc: TrainprobeError, where: Place) -> str:
    """A trainprobe error raised far side is that error's own sentence (not ``RemoteExceptionError: …``,
    by the tasks' one rule, :func:`trainprobe.tasks.raised_far_side`); the target is the one the user named,
    and the local default names none, as the CLI without ``--on``."""
    if isinstance(exc, RemoteExceptionError):
        from trainprobe.tasks import raised_far_side

        exc = raised_far_side(exc) or exc
    message = str(exc)
    prefix = where.engine + ": "
    if message.startswith(prefix):
        rest = message[len(prefix) :]
        return rest if where.label is None else f"{where.label}: {rest}"
    return message


# -- the tools' documents ------------------------------------------------------------------------------------


def on(where: Place, task: Callable[..., R], *args: Any, timeout: float, **kwargs: Any) -> R:
    """``task(where.engine, *args, **kwargs)`` (a ``trainprobe.tasks.*_on``), its errors worded as the CLI
    words them."""
    with presented(where):
        return task(where.engine, *args, timeout=timeout, **kwargs)  # the tasks' one connect timeout


def triage(
    target: str, run_dir: str, *, threshold: float, stall_floor_s: float, events: list[str], timeout: float
) -> dict[str, Any]:
    from trainprobe.tasks import triage_on

    where = place(target, "triage")
    report = on(
        where, triage_on, run_dir, timeout=timeout, threshold=threshold, stall_floor_s=stall_floor_s,
        event_patterns=list(events),
    )  # fmt: skip
    report.target = where.label
    return report.to_json()


def scan(target: str, paths: list[str], *, stats: bool, verify: bool, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import scan_on

    return on(place(target, "scan"), scan_on, paths, stats=stats, verify=verify, timeout=timeout).to_json()


def check(target: str, paths: list[str], *, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import check_on

    return on(place(target, "check"), check_on, paths, timeout=timeout)


def diff(target: str, a: str, b: str, *, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import diff_on

    return on(place(target, "diff"), diff_on, a, b, timeout=timeout)


def logs(target: str, paths: list[str], *, timeout: float, **options: Any) -> dict[str, Any]:
    """``logs --json``'s document; ``options`` are :class:`trainprobe.metrics.Options` fields (``threshold``,
    ``window``, ``stall_factor``, ``stall_floor_s``, ``event_patterns``, ``checkpoints``), checked as the CLI
    checks its flags."""
    from trainprobe.metrics import Options
    from trainprobe.tasks import logs_on

    if options.get("window", 50) < 5:
        raise UsageError("--window must be at least 5")
    where = place(target, "logs")
    return on(where, logs_on, paths, options=Options.from_json(options), timeout=timeout).to_json()


def watch_tail(target: str, path: str, *, timeout: float, **options: Any) -> dict[str, Any]:
    """:func:`trainprobe.tasks.tail.tail_on`'s document; ``options`` are its ``lines``, ``since_step``,
    ``threshold`` and ``event_patterns``."""
    from trainprobe.tasks.tail import tail_on

    return on(place(target, "watch_tail"), tail_on, path, timeout=timeout, **options)


def probe(target: str, *, cuda: bool, timeout: float) -> dict[str, Any]:
    """``probe --json``: one target's report, or for a fleet the fleet document (each result a report)."""
    from trainprobe.remote.fanout import needs_fleet
    from trainprobe.remote.probe import probe as probe_one
    from trainprobe.remote.probe import probe_fleet
    from trainprobe.remote.session import CONNECT_TIMEOUT_S

    targets = targets_of(target)
    if needs_fleet(targets):
        fleet = probe_fleet(
            [str(t) for t in targets], cuda=cuda, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S
        )
        return fleet.to_json()
    where = place_of(targets[0])
    with presented(where):
        return probe_one(where.engine, cuda=cuda, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S)


def run(target: str, script: str, args: list[str], *, need: list[str], timeout: float) -> dict[str, Any]:
    """``run --json``'s document (a fleet's for a fleet). A run that failed (the script raised, timed out, the
    target is unreachable) is a document whose ``error`` says so, as the CLI prints it; see
    :func:`run_failure`."""
    from trainprobe.remote import run as run_one
    from trainprobe.remote.fanout import needs_fleet, run_fleet

    # remote.run takes a one-line str naming an existing file for a path: a newline keeps it source text.
    source = script if script.endswith("\n") else script + "\n"
    targets = targets_of(target)
    if needs_fleet(targets):
        return run_fleet(targets, source, args, timeout=timeout, need=need).to_json()
    where = place_of(targets[0])
    with presented(where):
        result = run_one(where.engine, source, args, timeout=timeout, need=need)
    document = result.to_json()
    document["stdout_log"] = str(result.stdout_path)
    document["stderr_log"] = str(result.stderr_path)
    return document


def run_failure(document: dict[str, Any]) -> str | None:
    """The sentence for a single run that failed (None when it ran to its end), without the target for the
    local default, as the CLI without ``--on`` words its errors."""
    error = document.get("error")
    if not isinstance(error, dict):
        return None
    message = str(error.get("message"))
    local = engine_target(LOCAL) + ": "
    return message[len(local) :] if message.startswith(local) else message
