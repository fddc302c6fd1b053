"""Each command's --on names its task (``Remote.task``) once; the task module holds what runs there."""

from __future__ import annotations

import importlib
import inspect

import pytest

from trainprobe.cli import COMMANDS
from trainprobe.cli._where import Where


def _remote_of(name: str) -> object:
    return importlib.import_module(f"trainprobe.cli.{name}").COMMAND.remote


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_declared_task_resolves_to_what_its_targets_need(name: str) -> None:
    """The row a command's ``Remote.task`` names resolves, through the CLI's own lookup, to a ``*_on`` (and
    for a fleet a ``*_on_fleet``) that takes the --on limits: a misspelt row fails here, not at a user's
    first ``--on``."""
    remote = _remote_of(name)
    task = getattr(remote, "task", None)
    if task is None:
        return
    where = Where(on=["local"], config=None, timeout=1.0, connect_timeout=2.0, parallel=3, task=task)
    on = where.task_function("on")
    inspect.signature(on).bind_partial("local", **where.limits())
    if remote.targets == "fleet":  # type: ignore[attr-defined]
        on_fleet = where.task_function("on_fleet")
        inspect.signature(on_fleet).bind_partial(["local"], on_done=print, **where.fleet_limits())


def test_every_command_that_reads_files_there_runs_a_task() -> None:
    with_task = {name for name in COMMANDS if getattr(_remote_of(name), "task", None)}
    assert with_task == {"scan", "check", "diff", "logs", "triage"}
