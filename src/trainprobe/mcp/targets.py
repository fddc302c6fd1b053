"""Where an MCP tool's work runs: the target a client names, resolved as every command's ``--on`` is, and the
errors worded as the CLI words them. Each tool (:mod:`trainprobe.mcp.tools`) reaches the library through
:func:`on` (or, for ``probe`` and ``run``, the engine with :func:`place_of` and :func:`presented`).

Every call goes through the remote engine, the local default too (``local//python=<this interpreter>``):
the engine's timeout kills the work when it runs over (a thread of the server could not be stopped), a crash
or a large memory map stays in a child process, and the engine keeps the full output in the runs directory.

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


def on(where: Place, task: Callable[..., R], *args: Any, timeout: float, **kwargs: Any) -> R:
    """``task(where.engine, *args, **kwargs)`` (a ``trainprobe.tasks.*_on``), its errors worded as the CLI
    words them."""
    with presented(where):
        return task(where.engine, *args, timeout=timeout, **kwargs)  # the tasks' one connect timeout
