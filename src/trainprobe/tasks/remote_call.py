"""One library function run where the files are: shipped, called on a target or a fleet, its JSON decoded."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar

import trainprobe.errors as errors
from trainprobe.errors import RemoteError, RemoteExceptionError, TrainprobeError, UsageError
from trainprobe.remote.fleet_result import DEFAULT_PARALLEL
from trainprobe.remote.session import CONNECT_TIMEOUT_S

TYPE_CHECKING = False
if TYPE_CHECKING:
    from trainprobe.remote.fleet_result import FleetResult, Outcome
    from trainprobe.remote.target import Target

R = TypeVar("R")


class Limits(TypedDict, total=False):
    """How long a task may take on a target, as every ``*_on`` takes it (``**limits``) and passes it on to
    :meth:`RemoteTask.on`, which holds the defaults: ``timeout`` (seconds before the work is killed; None, the
    default: no limit) and ``connect_timeout`` (seconds to connect and log in; ``CONNECT_TIMEOUT_S``)."""

    timeout: float | None
    connect_timeout: float


class FleetLimits(Limits, total=False):
    """:class:`Limits` for each target of a fleet, and how the fleet runs, as every ``*_on_fleet`` takes it
    and passes it on to :meth:`RemoteTask.on_fleet`, which holds the defaults: ``parallel`` targets at once
    (``DEFAULT_PARALLEL``), ``on_done`` called with each target's outcome as it ends, ``log_dir`` the fleet's
    log directory (default: a new one under the runs directory)."""

    parallel: int
    on_done: Callable[[Outcome], None] | None
    log_dir: str | Path | None


@dataclass
class FleetReports(Generic[R]):
    """A task run on a fleet: every target's outcome, and the decoded report of each that gave one."""

    fleet: FleetResult
    reports: dict[str, R] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """The fleet's code from each report's own: see :meth:`exit_code_by`."""
        return self.exit_code_by(report_exit_code)

    def exit_code_by(self, code_of: Callable[[R], int]) -> int:
        """1 if any target failed (no report) or its report's code (``code_of``) is 1, else the largest
        report code (2: some target could not read everything); a finding anywhere wins over unreadable."""
        codes = [
            code_of(self.reports[o.target]) if o.target in self.reports else 1 for o in self.fleet.outcomes
        ]
        if not codes:
            return self.fleet.exit_code
        return 1 if 1 in codes else max(codes)

    def to_json(
        self, *, exit_code: int | None = None, result: Callable[[R], Any] | None = None
    ) -> dict[str, Any]:
        """The fleet document: :meth:`FleetResult.to_json` with each target's report in ``result`` (its
        ``to_json()``, as the command prints it for one target, or what ``result`` makes of it), null for a
        target without one (its raw answer stays in the run's log directory), and the fleet's
        ``exit_code`` (``exit_code``: one computed with a command's rule, e.g. ``check --strict``)."""
        data = self.fleet.to_json()
        data["exit_code"] = self.exit_code if exit_code is None else exit_code
        for entry in data["targets"]:
            report = self.reports.get(entry["target"])
            entry["result"] = None if report is None else (result or _report_json)(report)
        return data


def report_exit_code(report: Any) -> int:
    """A report's exit code: its ``exit_code`` attribute, or the ``exit_code`` of a report document."""
    if isinstance(report, Mapping):
        return int(report["exit_code"])
    return int(report.exit_code)


def _report_json(report: Any) -> Any:
    to_json = getattr(report, "to_json", None)
    return to_json() if callable(to_json) else report


@dataclass(frozen=True)
class RemoteTask(Generic[R]):
    """``function`` run on the far side (its package and ``modules`` shipped, imported from memory there),
    its JSON return value turned into ``R`` by ``decode``; ``need`` names the modules the far-side
    interpreter must have (discovery picks one that has them); ``what`` names the task in errors;
    ``far_paths`` the arguments that are paths on the far side (``"0"``, a keyword, ``"1.checkpoints"``),
    whose ``~`` and ``$HOME`` expand there as the home of the user the task runs as."""

    what: str
    function: Callable[..., Any]
    decode: Callable[[Any], R]
    need: tuple[str, ...] = ("numpy",)
    modules: tuple[str, ...] = ()
    far_paths: tuple[str, ...] = ()

    def on(
        self, target: str | Target, *args: Any, timeout: float | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S, **kwargs: Any,
    ) -> R:  # fmt: skip
        """The report from ``target``; raises the run's RemoteError (no interpreter with ``need``: an
        InterpreterNotFoundError listing what each candidate lacked), or the trainprobe error the function
        raised there (see :func:`raised_far_side`)."""
        from trainprobe.remote import call

        try:
            data = call(
                target, self.function, *args, timeout=timeout, connect_timeout=connect_timeout,
                need=self.need, modules=self.modules, far_paths=self.far_paths, **kwargs,
            )  # fmt: skip
        except RemoteExceptionError as exc:
            raise (raised_far_side(exc) or exc) from None
        return self._decoded(str(target), data)

    def on_fleet(
        self,
        targets: Sequence[str | Target],
        *args: Any,
        parallel: int = DEFAULT_PARALLEL,
        timeout: float | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        on_done: Callable[[Outcome], None] | None = None,
        log_dir: str | Path | None = None,
        **kwargs: Any,
    ) -> FleetReports[R]:
        """The task on every target (``parallel`` at once); never raises for a target's failure. A target
        whose answer is not a report ends with status ``error`` and says so."""
        from trainprobe.remote.fanout import call_fleet

        fleet = call_fleet(
            targets, self.function, *args, parallel=parallel, timeout=timeout,
            connect_timeout=connect_timeout, need=self.need, on_done=on_done, log_dir=log_dir,
            modules=self.modules, far_paths=self.far_paths, **kwargs,
        )  # fmt: skip
        reports: dict[str, R] = {}
        for outcome in fleet.outcomes:
            if not outcome.ok:
                continue
            try:
                reports[outcome.target] = self._decoded(outcome.target, outcome.result)
            except RemoteError as exc:
                outcome.status, outcome.error, outcome.summary = "error", exc, exc.reason
        return FleetReports(fleet, reports)

    def _decoded(self, target: str, data: Any) -> R:
        try:
            return self.decode(data)
        except (KeyError, TypeError, ValueError, UsageError) as exc:
            raise RemoteError(
                target,
                f"the remote {self.what} returned no {self.what} report ({type(exc).__name__}: {exc})",
                hint="see the run's log directory (stdout, stderr, meta.json)",
            ) from None


def document_with(*keys: str) -> Callable[[Any], dict[str, Any]]:
    """The decoder of a task whose report is a JSON document (``check --json``'s, ``diff --json``'s): the
    answer itself, once it is an object holding ``keys`` (ValueError naming those it lacks)."""

    def decode(data: Any) -> dict[str, Any]:
        missing = [key for key in keys if not isinstance(data, dict) or key not in data]
        if missing:
            raise ValueError(f"no {' and '.join(map(repr, missing))} in the answer")
        return dict(data)

    return decode


def raised_far_side(error: RemoteExceptionError) -> TrainprobeError | None:
    """The trainprobe error a task's function raised on the far side (a LogError for a log that is not there,
    a UsageError for a bad option), as the same class: its exit code, and its sentence prefixed by the
    target, as the local function would have said it; its other fields (a path) are not carried. None when
    the far side raised something else (a bug: the RemoteExceptionError keeps its traceback)."""
    kind, _, message = error.reason.partition(": ")
    cls = getattr(errors, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, TrainprobeError)) or not message:
        return None
    if issubclass(cls, RemoteError):  # the far side's own remote run failed: still a failure of this run
        return None
    far = cls.__new__(cls)
    TrainprobeError.__init__(far, f"{error.target}: {message}" if error.target else message)
    return far
