"""Each command's --on names its task (``Remote.task``) once; the task module holds what runs there."""

from __future__ import annotations

import importlib
import inspect

import pytest

from trainprobe.cli import COMMANDS


def _remote_of(name: str) -> object:
    return importlib.import_module(f"trainprobe.cli.{name}").COMMAND.remote


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_declared_task_has_what_its_targets_need(name: str) -> None:
    remote = _remote_of(name)
    task = getattr(remote, "task", None)
    if task is None:
        return
    module, _, function = task.partition(":")
    tasks = importlib.import_module(f"trainprobe.tasks.{module}")
    on = getattr(tasks, f"{function}_on")
    assert {"timeout", "connect_timeout"} <= set(inspect.signature(on).parameters) | _limits_of(on)
    if remote.targets == "fleet":  # type: ignore[attr-defined]
        on_fleet = getattr(tasks, f"{function}_on_fleet")
        assert "on_done" in set(inspect.signature(on_fleet).parameters) | _limits_of(on_fleet)


def _limits_of(function: object) -> set[str]:
    """The keywords a ``**limits: Unpack[Limits]`` parameter takes."""
    from trainprobe.tasks.remote_call import FleetLimits

    params = inspect.signature(function).parameters  # type: ignore[arg-type]
    return (
        set(FleetLimits.__annotations__) | set(FleetLimits.__optional_keys__)
        if any(p.kind is p.VAR_KEYWORD for p in params.values())
        else set()
    )


def test_every_command_that_reads_files_there_runs_a_task() -> None:
    with_task = {name for name in COMMANDS if getattr(_remote_of(name), "task", None)}
    assert with_task == {"scan", "check", "diff", "logs", "triage"}
