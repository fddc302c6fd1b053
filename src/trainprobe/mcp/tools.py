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
watch_tail     ``trainprobe.remote.call`` of :func:`tail_findings_json` (``trainprobe.metrics.follow``)
=============  ==========================================================================================

This module is shipped to the far side for :func:`tail_findings_json`, so its top level imports only the
standard library and ``trainprobe.errors``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from trainprobe.errors import RemoteExceptionError, TrainprobeError, UsageError

LOCAL = "local"
CONNECT_TIMEOUT_S = 20.0
NEED = ("numpy",)  # what the shipped readers import far side


class Place(NamedTuple):
    """Where a tool's work runs: ``engine`` is the target the engine gets; ``label`` is the target the user
    named (None for this machine, as the CLI without ``--on``), which reports and messages show."""

    engine: str
    label: str | None


def targets_of(target: str) -> list[str]:
    """The canonical targets ``target`` names: one, or a fleet (a range, a group of the targets file)."""
    from trainprobe.remote.fleet import expand_targets, load_config

    if target.strip() in ("", LOCAL):
        return [LOCAL]
    return expand_targets([target], load_config(None))


INTERPRETER_SETTINGS = ("python", "venv", "conda", "env")


def interpreter_settings(target: str) -> list[str]:
    """The interpreter settings (``python=``, ``venv=``, ``conda=``, ``env=``) the client wrote in ``target``,
    each hop once, in order: those of every target a range expands to. A name from the targets file (a
    target or a group) is the user's own configuration and names none here."""
    from trainprobe.remote import parse_target
    from trainprobe.remote.fleet import expand_targets, load_config

    spec = target.strip()
    if spec in ("", LOCAL):
        return []
    config = load_config(None)
    if spec in config.targets or spec in config.groups:
        return []
    found: list[str] = []
    for one in expand_targets([spec], config):
        for hop in parse_target(one).hops:
            if hop.kind in INTERPRETER_SETTINGS and hop.spec() not in found:
                found.append(hop.spec())
    return found


def is_fleet(targets: Sequence[str]) -> bool:
    from trainprobe.remote.fanout import needs_fleet

    return needs_fleet(targets)


def place(target: str, tool: str) -> Place:
    """The one target a single-target tool runs on; a fleet is a usage error naming the way out."""
    targets = targets_of(target)
    if is_fleet(targets):
        raise UsageError(
            f"{target}: names {len(targets)} targets, and {tool} takes one",
            hint="call it once per target (run and probe take fleets)",
        )
    return place_of(targets[0])


def place_of(target: str) -> Place:
    """Where one canonical target (from :func:`targets_of`) runs, and how it is shown."""
    return Place(engine_target(target), None if target == LOCAL else target)


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
    """A trainprobe error raised far side is that error's own sentence (not ``RemoteExceptionError: …``);
    the target is the one the user named, and the local default names none, as the CLI without ``--on``."""
    import trainprobe.errors as errors

    if isinstance(exc, RemoteExceptionError):
        kind, _, far = exc.reason.partition(": ")
        cls = getattr(errors, kind, None)
        if isinstance(cls, type) and issubclass(cls, TrainprobeError) and far:
            return far if where.label is None else f"{where.label}: {far}"
    message = str(exc)
    prefix = where.engine + ": "
    if message.startswith(prefix):
        rest = message[len(prefix) :]
        return rest if where.label is None else f"{where.label}: {rest}"
    return message


# -- the tools' documents ------------------------------------------------------------------------------------


def triage(
    target: str, run_dir: str, *, threshold: float, stall_floor_s: float, events: list[str], timeout: float
) -> dict[str, Any]:
    from trainprobe.tasks import triage_on

    where = place(target, "triage")
    with presented(where):
        report = triage_on(
            where.engine,
            run_dir,
            timeout=timeout,
            connect_timeout=CONNECT_TIMEOUT_S,
            threshold=threshold,
            stall_floor_s=stall_floor_s,
            event_patterns=list(events),
        )
        report.target = where.label
        return report.to_json()


def scan(target: str, paths: list[str], *, stats: bool, verify: bool, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import scan_on

    where = place(target, "scan")
    with presented(where):
        report = scan_on(
            where.engine,
            paths,
            stats=stats,
            verify=verify,
            timeout=timeout,
            connect_timeout=CONNECT_TIMEOUT_S,
        )
        return report.to_json()


def check(target: str, paths: list[str], *, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import check_on

    where = place(target, "check")
    with presented(where):
        return check_on(where.engine, paths, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S)


def diff(target: str, a: str, b: str, *, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import diff_on

    where = place(target, "diff")
    with presented(where):
        return diff_on(where.engine, a, b, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S)


def logs(target: str, paths: list[str], *, timeout: float, **options: Any) -> dict[str, Any]:
    """``logs --json``'s document; ``options`` are :class:`trainprobe.metrics.Options` fields (``threshold``,
    ``window``, ``stall_factor``, ``stall_floor_s``, ``event_patterns``, ``checkpoints``), checked as the CLI
    checks its flags."""
    from trainprobe.metrics import Options
    from trainprobe.tasks import logs_on

    if options.get("window", 50) < 5:
        raise UsageError("--window must be at least 5")
    where = place(target, "logs")
    with presented(where):
        report = logs_on(
            where.engine, paths, options=Options.from_json(options), timeout=timeout,
            connect_timeout=CONNECT_TIMEOUT_S,
        )  # fmt: skip
        return report.to_json()


def watch_tail(target: str, path: str, *, timeout: float, **options: Any) -> dict[str, Any]:
    return _call("watch_tail", target, tail_findings_json, path, timeout=timeout, **options)


def _call(
    tool: str, target: str, function: Callable[..., Any], *args: Any, timeout: float, **kwargs: Any
) -> dict[str, Any]:
    """``function(*args, **kwargs)`` where the files are, as ``trainprobe.tasks`` does for scan and check."""
    from trainprobe.remote import call

    where = place(target, tool)
    with presented(where):
        document = call(
            where.engine,
            function,
            *args,
            timeout=timeout,
            connect_timeout=CONNECT_TIMEOUT_S,
            need=NEED,
            modules=("trainprobe.metrics",) if function.__module__ == __name__ else (),
            **kwargs,
        )
    if not isinstance(document, dict):
        raise TrainprobeError(f"{where.label or LOCAL}: {tool} returned no report")
    return document


def probe(target: str, *, cuda: bool, timeout: float) -> dict[str, Any]:
    """``probe --json``: one target's report, or for a fleet the fleet document (each result a report)."""
    from trainprobe.remote.probe import probe as probe_one
    from trainprobe.remote.probe import probe_fleet

    targets = targets_of(target)
    if is_fleet(targets):
        return probe_fleet(targets, cuda=cuda, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S).to_json()
    where = place_of(targets[0])
    with presented(where):
        return probe_one(where.engine, cuda=cuda, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S)


def run(target: str, script: str, args: list[str], *, need: list[str], timeout: float) -> dict[str, Any]:
    """``run --json``'s document (a fleet's for a fleet). A run that failed (the script raised, timed out, the
    target is unreachable) is a document whose ``error`` says so, as the CLI prints it; see
    :func:`run_failure`."""
    from trainprobe.remote import run as run_one
    from trainprobe.remote.fanout import run_fleet

    # remote.run takes a one-line str naming an existing file for a path: a newline keeps it source text.
    source = script if script.endswith("\n") else script + "\n"
    targets = targets_of(target)
    if is_fleet(targets):
        fleet = run_fleet(
            targets, source, args, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S, need=need
        )
        return fleet.to_json()
    where = place_of(targets[0])
    with presented(where):
        result = run_one(
            where.engine, source, args, timeout=timeout, connect_timeout=CONNECT_TIMEOUT_S, need=need
        )
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


# -- run far side --------------------------------------------------------------------------------------------


_BLOCK = 1 << 20


def read_tail(path: str, lines: int) -> tuple[list[str], int, int]:
    """(the last ``lines`` complete lines of ``path``, the byte offset of the first, the file's size).

    Read backwards a block at a time, so a 450 MB log costs what its tail costs. A last line without its
    newline is still being written and is left for the next look."""
    import os
    import stat

    from trainprobe.errors import LogError

    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LogError(path, "not a regular file (a FIFO, socket or device is not read)")
        with open(fd, "rb") as fh:
            size = fh.seek(0, 2)
            start, blocks, newlines = size, [], 0
            while start > 0 and newlines <= lines:
                step = min(_BLOCK, start)
                start -= step
                fh.seek(start)
                block = fh.read(step)
                newlines += block.count(b"\n")
                blocks.append(block)
    except FileNotFoundError:
        raise LogError(path, "no such file or directory", hint="check the path") from None
    except IsADirectoryError:
        raise LogError(path, "is a directory", hint="watch one log file") from None
    except OSError as exc:
        raise LogError(path, f"cannot be read ({exc.strerror or exc})") from None
    data = b"".join(reversed(blocks))
    end = data.rfind(b"\n") + 1
    parts = data[:end].split(b"\n")[:-1]
    if start > 0:
        parts = parts[1:]  # the first one began before the bytes read
    kept = parts[-lines:] if lines else []
    first = start + end - sum(len(p) + 1 for p in kept)
    return [p.decode("utf-8", "replace") for p in kept], first, size


def tail_findings_json(
    path: str,
    *,
    lines: int = 5000,
    since_step: float | None = None,
    threshold: float = 6.0,
    event_patterns: list[str] | None = None,
) -> dict[str, Any]:
    """The findings of the last ``lines`` lines of a growing text or JSONL log, as ``watch`` finds them (its
    summary document), with a ``tail`` object saying which bytes were read; only findings after
    ``since_step`` when given."""
    from trainprobe.errors import LogError
    from trainprobe.metrics import Options
    from trainprobe.metrics.follow import OnlineAnalyzer

    text, first, size = read_tail(path, lines)
    online = OnlineAnalyzer(
        Path(path).stem, Options(threshold=threshold, event_patterns=list(event_patterns or []))
    )
    online.feed(text)
    rows = len(online.run())
    if rows < 2:
        raise LogError(
            path,
            f"no metric rows in its last {len(text)} line(s)",
            hint="watch_tail reads text and JSONL logs; the logs tool reads CSV, TensorBoard and the rest",
        )
    online.new_findings(final=True)
    assert online.report is not None  # set by new_findings once there are two rows
    document = online.report.to_json()
    total = len(document["findings"])
    if since_step is not None:
        document["findings"] = [f for f in document["findings"] if _after(f["step"], since_step)]
        document["summary"] = {
            s: sum(f["severity"] == s for f in document["findings"]) for s in document["summary"]
        }
    document["tail"] = {
        "path": path,
        "file_bytes": size,
        "from_byte": first,
        "lines": len(text),
        "rows": rows,
        "since_step": since_step,
        "findings_before_since_step": total - len(document["findings"]),
    }
    return document


def _after(step: Any, since: float) -> bool:
    return isinstance(step, (int, float)) and step > since
