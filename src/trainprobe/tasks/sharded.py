"""``scan|check --on FLEET --sharded PATH``: one checkpoint unit scanned (or checked) where its files are, by
every target that holds some of them, as one report.

Two rounds on the fleet, and the library in between (this module only runs things):

1. every target lists what it has of PATH (:func:`trainprobe.checkpoint.sharded.inventory.inventory`);
2. :func:`trainprobe.checkpoint.sharded.plan.plan_shards` decides who reads which file, and each target
   with a share reads it where it is (:func:`trainprobe.checkpoint.sharded.scan_share.scan_share`), its
   progress (files and bytes) coming back on its stderr; the files of a target that fails are reported as
   not read;
3. :func:`trainprobe.checkpoint.sharded.merge.merge_shards` makes one report of the reads.

::

    from trainprobe.tasks import scan_sharded
    result = scan_sharded(["ssh=node[01-04]"], "/local/ckpt/step_4000")
    result.report          # the ScanReport a scan of all files in one place gives
    result.to_json()["sharded"]["readers"]   # which target read which file
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainprobe.errors import UsageError
from trainprobe.remote.fleet_result import DEFAULT_PARALLEL
from trainprobe.remote.session import CONNECT_TIMEOUT_S
from trainprobe.tasks.remote_call import Limits, RemoteTask

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainprobe.checkpoint.sharded.merge import ShardedCheck, ShardedScan
    from trainprobe.checkpoint.sharded.plan import ShardPlan
    from trainprobe.remote.target import Target


@dataclass(frozen=True)
class ShareProgress:
    """How far one target is in its share: files and bytes done of its total."""

    target: str
    files_done: int
    files: int
    bytes_done: int
    bytes: int
    done: bool = False
    error: str | None = None


class ShardedLimits(Limits, total=False):
    """How a sharded scan or check runs, as :func:`scan_sharded` and :func:`check_sharded` take it (the
    defaults are :class:`_Rounds`'): :class:`~trainprobe.tasks.remote_call.Limits` for each target's run,
    ``parallel`` targets at once, ``on_progress`` called with each target's progress, ``log_dir`` the runs'
    log directory (default: a new one under the runs directory)."""

    parallel: int
    on_progress: Callable[[ShareProgress], None] | None
    log_dir: str | Path | None


@dataclass(frozen=True)
class _Rounds:
    """The settings of both rounds on the fleet (:class:`ShardedLimits`, with their defaults)."""

    parallel: int = DEFAULT_PARALLEL
    timeout: float | None = None
    connect_timeout: float = CONNECT_TIMEOUT_S
    on_progress: Callable[[ShareProgress], None] | None = None
    log_dir: str | Path | None = None

    def root(self, name: str) -> Path:
        """The runs' log directory: ``log_dir``, else a new run directory called ``name``."""
        return Path(self.log_dir) if self.log_dir else _run_dir(name)


def _inventory_report(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or "files" not in data:
        raise ValueError("no 'files' in the answer")
    return data


def scan_sharded(
    targets: Sequence[str | Target],
    path: str,
    *,
    stats: bool = False,
    verify: bool = False,
    **limits: Unpack[ShardedLimits],
) -> ShardedScan:
    """Scan the unit ``path`` (a directory, the same path on every target) on the targets that hold its
    files; see the module doc. Raises UsageError when no target has a checkpoint unit at ``path``."""
    from trainprobe.checkpoint.sharded.merge import merge_shards
    from trainprobe.checkpoint.sharded.plan import plan_shards
    from trainprobe.checkpoint.sharded.scan_share import scan_share

    started = time.perf_counter()
    rounds = _Rounds(**limits)
    root = rounds.root("sharded")
    inventories, failed = _inventories(targets, path, rounds, root)
    plan = plan_shards(_unit_path(path, inventories), inventories)
    results, lost = _run_shares(
        plan, scan_share, {"stats": stats, "verify": verify}, "reads", rounds, root / "scan"
    )
    failed.update(lost)
    return merge_shards(
        plan, results, failed, stats=stats, verify=verify, seconds=time.perf_counter() - started
    )


def check_sharded(
    targets: Sequence[str | Target], path: str, **limits: Unpack[ShardedLimits]
) -> ShardedCheck:
    """``check`` the unit ``path`` (a directory, the same path on every target) on the targets that hold
    its files, as :func:`scan_sharded` scans it: one check report
    (:func:`trainprobe.checkpoint.sharded.merge.merge_check_shards`). A multi-file part goes whole to a
    target that holds all its data files; where none does, it is checked in shares and what cannot be
    judged in shares is reported as not checked. Raises UsageError when no target has a checkpoint unit
    at ``path``."""
    from trainprobe.checkpoint.sharded.check_share import check_share
    from trainprobe.checkpoint.sharded.merge import merge_check_shards
    from trainprobe.checkpoint.sharded.plan import plan_shards

    rounds = _Rounds(**limits)
    root = rounds.root("check-sharded")
    inventories, failed = _inventories(targets, path, rounds, root)
    plan = plan_shards(_unit_path(path, inventories), inventories, whole=True)
    results, lost = _run_shares(plan, check_share, {}, "checks", rounds, root / "check")
    failed.update(lost)
    return merge_check_shards(plan, results, failed)


def _run_dir(name: str) -> Path:
    from trainprobe.remote.logs import new_run_dir

    return new_run_dir(name)


def _inventories(
    targets: Sequence[str | Target], path: str, rounds: _Rounds, root: Path
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Round one: what each target has of ``path`` (the directories), and the targets that failed."""
    from trainprobe.checkpoint.sharded.inventory import inventory

    found = RemoteTask("inventory", inventory, _inventory_report, far_paths=("0",)).on_fleet(
        targets, path, parallel=rounds.parallel, timeout=rounds.timeout,
        connect_timeout=rounds.connect_timeout, log_dir=root / "inventory",
    )  # fmt: skip
    failed = {o.target: o.summary or o.status for o in found.fleet.outcomes if o.target not in found.reports}
    return {t: inv for t, inv in found.reports.items() if inv.get("kind") == "dir"}, failed


def _unit_path(path: str, inventories: Mapping[str, dict[str, Any]]) -> str:
    """The unit's path on every target: ``path`` as each inventory found it (``~`` and ``$HOME`` expanded
    there), which the shares then read. A path that expands to different directories on different targets
    (other users, other homes) names no one unit: a UsageError."""
    found = sorted({str(inv.get("path") or path) for inv in inventories.values()})
    if len(found) > 1:
        raise UsageError(
            f"{path} is {' or '.join(found)} on different targets, so it names no one unit",
            hint="give the unit's absolute path",
        )
    return found[0] if found else path


def _run_shares(
    plan: ShardPlan,
    share: Callable[..., dict[str, Any]],
    options: Mapping[str, Any],
    key: str,
    rounds: _Rounds,
    log_dir: Path,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each target's share read where it is by ``share``
    (:func:`~trainprobe.checkpoint.sharded.scan_share.scan_share` or
    :func:`~trainprobe.checkpoint.sharded.check_share.check_share`, with ``options``; its answer holds
    ``key``), ``rounds.parallel`` at once, each run's log under ``log_dir``: (results, failed target ->
    why)."""
    from trainprobe.remote import api
    from trainprobe.remote.fleet_result import outcome_of
    from trainprobe.remote.shipping import CALL_DRIVER, call_argv

    results: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    lock = threading.Lock()
    on_progress = rounds.on_progress

    def one(index: int, target: str, requests: list[dict[str, Any]]) -> None:
        argv, shipped = call_argv(share, (plan.path, requests), dict(options), ())
        lines = _ProgressLines(target, on_progress)
        run = api.run(
            target, CALL_DRIVER, argv, timeout=rounds.timeout, connect_timeout=rounds.connect_timeout,
            need=("numpy",), stderr=lines.feed, log_dir=log_dir / f"{index:03d}-{target_slug(target)}",
            modules=shipped,
        )  # fmt: skip
        outcome = outcome_of(run)
        ok = outcome.ok and isinstance(outcome.result, dict) and key in outcome.result
        with lock:
            if ok:
                results[target] = outcome.result
            else:
                failed[target] = outcome.summary or outcome.status
        if on_progress is not None:
            last = lines.last or ShareProgress(target, 0, 0, 0, 0)
            on_progress(
                ShareProgress(
                    target, last.files_done, last.files, last.bytes_done, last.bytes, True,
                    None if ok else failed[target],
                )
            )  # fmt: skip

    requests = plan.requests
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=max(1, min(rounds.parallel, len(requests) or 1))
    ) as pool:
        futures = [pool.submit(one, i, t, reqs) for i, (t, reqs) in enumerate(requests.items())]
        for future in futures:
            future.result()
    return results, failed


def target_slug(target: str) -> str:
    from trainprobe.remote.target import parse_target

    return parse_target(target).slug


class _ProgressLines:
    """The far side's ``trainprobe-progress FILES/TOTAL BYTES/TOTAL`` lines out of its stderr bytes."""

    def __init__(self, target: str, on_progress: Callable[[ShareProgress], None] | None) -> None:
        self.target = target
        self.on_progress = on_progress
        self.buffer = b""
        self.last: ShareProgress | None = None

    def feed(self, data: bytes) -> None:
        from trainprobe.checkpoint.sharded.scan_share import PROGRESS

        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for raw in lines:
            words = raw.decode("utf-8", "replace").split()
            if len(words) == 3 and words[0] == PROGRESS:
                try:
                    (fd, ft), (bd, bt) = (map(int, w.split("/")) for w in words[1:])
                except ValueError:
                    continue
                self.last = ShareProgress(self.target, fd, ft, bd, bt)
                if self.on_progress is not None:
                    self.on_progress(self.last)
