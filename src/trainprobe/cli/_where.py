"""Where a command's work runs: its ``--on`` group as declared (:class:`Remote`) and as given
(:class:`Where`), the defaults it shares with the library, and whether the targets make a fleet."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from trainprobe.errors import UsageError

if TYPE_CHECKING:
    from trainprobe.remote.target import Target

#: seconds to connect and log in, the one default of every command and of the library
#: (``trainprobe.remote.session.CONNECT_TIMEOUT_S``; not imported from there: showing a command's help would
#: import the remote engine; ``tests/cli/test_contract.py`` holds the two equal)
CONNECT_TIMEOUT_S = 20.0
#: targets run at once in a fleet (``trainprobe.remote.fleet_result.DEFAULT_PARALLEL``, held equal so too)
PARALLEL = 32

CONFIG_HELP = (
    "The targets file (names and groups); default $TRAINPROBE_CONFIG or ~/.config/trainprobe/targets.toml."
)


class Remote(NamedTuple):
    """Where a command's work runs: the one ``--on`` group, declared once for every command that has one."""

    #: "fleet": --on repeatable (several targets, a range, a group, slurm=JOBID: a fleet) and --parallel;
    #: "one": --on names one target
    targets: Literal["fleet", "one"]
    #: --on's help
    on_help: str
    #: what --timeout kills, e.g. "the remote scan"; None: no --timeout (watch follows until it is stopped)
    work: str | None
    #: --timeout's default (None: no limit)
    timeout: float | None = 3600.0
    heading: str = "where the files are (--on)"
    #: False: the targets are the command's positional words (probe), there is no --on
    on: bool = True
    #: the library's "run it there" of the command: ``"module:name"`` under :mod:`trainprobe.tasks`, whose
    #: ``name_on`` (and, for a fleet, ``name_on_fleet``) take the local function's arguments and the limits
    #: (:meth:`Where.task_on`); giving a command ``--on`` is that module and this one line. None: the command
    #: runs its own remote work (run, probe, watch).
    task: str | None = None


class Where(NamedTuple):
    """Where a command's work runs: the values of its --on group, handed to it as one ``where`` argument."""

    #: the --on words; None: here (probe and run: their own target words, see :meth:`targets`)
    on: list[str] | None
    config: Path | None
    timeout: float | None
    connect_timeout: float
    parallel: int
    #: the command's task (:attr:`Remote.task`)
    task: str | None = None

    def limits(self) -> dict[str, Any]:
        """``timeout`` and ``connect_timeout``, as every ``tasks.*_on`` takes them."""
        return {"timeout": self.timeout, "connect_timeout": self.connect_timeout}

    def fleet_limits(self) -> dict[str, Any]:
        """:meth:`limits` and ``parallel``, as every ``tasks.*_on_fleet`` takes them."""
        return {**self.limits(), "parallel": self.parallel}

    def task_on(self, target: Target, *args: Any, **kwargs: Any) -> Any:
        """The command's task on one target: ``tasks.<module>.<name>_on(target, *args, **kwargs)`` within
        the --on limits."""
        return self.task_function("on")(target, *args, **kwargs, **self.limits())

    def task_on_fleet(
        self, targets: Sequence[Target], *args: Any, on_done: Callable[..., None], **kwargs: Any
    ) -> Any:
        """The command's task on every target of a fleet (``<name>_on_fleet``): its FleetReports."""
        return self.task_function("on_fleet")(
            targets, *args, on_done=on_done, **kwargs, **self.fleet_limits()
        )

    def task_function(self, suffix: str) -> Callable[..., Any]:
        """``<name>_<suffix>`` of the command's task module; a UsageError where this installation has no
        remote engine (asked before the targets are read, so that this is what the user is told)."""
        if self.task is None:
            raise ValueError("this command declares no task (Remote.task)")
        module, _, name = self.task.partition(":")
        try:
            tasks = importlib.import_module(f"trainprobe.tasks.{module}")
        except ImportError:  # an installation with the local readers only
            raise UsageError("remote work (--on) is not available in this installation") from None
        function: Callable[..., Any] = getattr(tasks, f"{name}_{suffix}")
        return function

    def targets(self, specs: Sequence[str] | None = None) -> list[Target]:
        """The targets --on (or ``specs``) names: ranges, names and groups of the targets file resolved
        (:func:`trainprobe.remote.fleet.resolve`)."""
        from trainprobe.remote.fleet import resolve

        return resolve(self.on or [] if specs is None else specs, self.config)

    def one(self, *, refusal: str, hint: str, specs: Sequence[str] | None = None) -> Target:
        """The one target --on names, resolved before anything starts; a fleet is refused as a usage error
        (``refusal`` says what the command does with one target)."""
        targets = self.targets(specs)
        if is_fleet(targets):
            many = f"{len(targets)} targets" if len(targets) > 1 else "every node of a Slurm job"
            raise UsageError(f"{refusal}; {' '.join(specs or self.on or [])} names {many}", hint=hint)
        return targets[0]


def is_fleet(targets: Sequence[Target]) -> bool:
    """More than one run: several targets, or a Slurm job (its nodes). One target without a Slurm hop is
    answered without importing the fleet engine (a single ``run`` does not need it)."""
    if len(targets) == 1 and all(hop.kind != "slurm" for hop in targets[0].hops):
        return False
    from trainprobe.remote.fanout import needs_fleet

    return needs_fleet(targets)
