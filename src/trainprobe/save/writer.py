"""A checkpoint writer for plain PyTorch loops that cannot produce a torn or half-written file.

``torch.save`` pickles the object first and copies tensor storages into the file one at a time, straight from
live memory. Run it in a thread while training continues and the file mixes optimizer steps.
``CheckpointWriter.save`` therefore copies every tensor into CPU buffers (kept between saves, pinned when CUDA
is there) *before it returns*; only then does a background thread serialize that private snapshot. The file
appears under its final name only after it is complete and fsynced (temp file in the same directory,
``os.replace``, fsync of the directory), then the manifest and the ``latest`` pointer follow the same way. A
SIGKILL at any moment leaves the previous checkpoint and ``latest`` intact.

With ``overlap_copy=True`` the copy of CPU parameters and optimizer state moves off the training thread: they
change only inside ``optimizer.step()``, so ``save`` copies everything else now and a step pre-hook on each
optimizer passed to it holds that optimizer's next ``step()`` until the background copy is done (see
:class:`CheckpointWriter`).

Layout of the directory::

    step-00000100.pt                 the checkpoint: {"step": 100, "model": ..., "optimizer": ..., **extra}
    step-00000100.pt.manifest.json   step, file name, size, sha256, per-tensor dtype/shape/finite flags
    latest                           one line: the file name of the newest complete checkpoint

This module is the writer itself (its public API and its two threads, the copier and the writer); the
directory's files are :mod:`trainprobe.save.files`, the snapshot :mod:`trainprobe.save.snapshot`.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from trainprobe.errors import SaveError, UsageError, missing_extra
from trainprobe.save.files import checkpoint_name, read_latest, remove_stale_temps, rotate, write_checkpoint
from trainprobe.save.snapshot import (
    BufferPool,
    PendingCopy,
    Snapshot,
    guarded_storages,
    state_of,
    take_snapshot,
)


def import_torch(needed_by: str = "CheckpointWriter") -> Any:
    """torch, imported on first use (``import trainprobe.save`` works without it); a MissingExtraError naming
    the torch extra when it is not installed."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the test extra
        raise missing_extra("torch", extra="torch", needed_by=needed_by) from None
    return torch


class CheckpointWriter:
    """Save training state consistently and atomically; training is blocked only while tensors are copied.

    ::

        writer = CheckpointWriter("ckpt", keep=3)
        for step in range(1, steps + 1):
            ...
            optimizer.step()
            if step % 100 == 0:
                writer.save(step, model=model, optimizer=optimizer, scheduler=scheduler)
        writer.close()

    ``save`` returns once the snapshot is taken; the file is written in a background thread. A failure in that
    thread is raised as :class:`~trainprobe.errors.SaveError` from the next ``save``, ``wait`` or ``close``.
    ``keep`` complete checkpoints are kept (None keeps all); the one ``latest`` names is never deleted.

    ``overlap_copy=True`` (opt-in): ``save`` copies only what can change outside ``optimizer.step()``
    before it returns (buffers such as BatchNorm running statistics, parameters no optimizer passed to
    ``save`` updates, plain values, ``param_groups``, schedulers, extras). CPU tensors that are parameters or
    state of an optimizer passed to ``save`` (``optimizer=`` or any extra that is a ``torch.optim.Optimizer``)
    are copied by a background thread while the next forward and backward run; a step pre-hook on each of
    those optimizers makes its next ``step()`` wait until that copy is done, so the checkpoint still holds the
    values at ``save`` time, and training stalls only when the copy outlasts forward + backward. The guarantee
    breaks if those tensors are written in place outside the hooked ``step()`` before it (manual clamping or
    re-initialisation under ``torch.no_grad()``, ``load_state_dict``, an optimizer not passed to ``save``
    that updates the same parameters) or if ``step()`` runs on another thread. CUDA tensors are copied before
    ``save`` returns, as without the option. ``stall_seconds`` then includes the time a hooked ``step()``
    waited.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep: int | None = 3,
        fsync: bool = True,
        buffers: int = 2,
        overlap_copy: bool = False,
    ) -> None:
        if keep is not None and keep < 1:
            raise UsageError(
                f"keep must be at least 1 (got {keep})", hint="pass keep=None to keep every checkpoint"
            )
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self.fsync = fsync
        self._torch = import_torch()
        self._cuda = bool(self._torch.cuda.is_available())
        if buffers < 1:
            raise UsageError(f"buffers must be at least 1 (got {buffers})")
        # ``buffers`` snapshot buffer sets, used in turn: a save waits only when that many writes are still in
        # flight (writes finish in order, so the set it reuses is free once a slot is).
        self._pools = [BufferPool(self._torch, pin=self._cuda) for _ in range(buffers)]
        self._slots = threading.Semaphore(buffers)
        self._saves = 0
        # One long-lived worker: starting a thread per save costs tens of milliseconds on a busy machine
        # (Thread.start waits for the new thread to get the GIL), which would all be stall.
        self._thread: threading.Thread | None = None
        self._jobs: queue.Queue[tuple[Snapshot, Path] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._error_step: int | None = None
        self._closed = False
        self.overlap_copy = overlap_copy
        # overlap_copy: a second thread copies, so a copy never queues behind the previous file's write.
        self._copier: threading.Thread | None = None
        self._copies: queue.Queue[tuple[Snapshot, Path, PendingCopy] | None] = queue.Queue()
        self._pending: list[PendingCopy] = []
        #: seconds each save() blocked the caller (waiting for the previous write plus the copy); with
        #: overlap_copy also the time the next hooked ``optimizer.step()`` waited for the copy
        self.stall_seconds: list[float] = []
        remove_stale_temps(self.directory)

    # -- public API --------------------------------------------------------------------------------

    def save(self, step: int, *, model: Any = None, optimizer: Any = None, **extra: Any) -> Path:
        """Snapshot ``model``/``optimizer`` state (modules, optimizers or plain state dicts) and ``extra``
        now; write it in the background. Returns the path the checkpoint will have once written."""
        if self._closed:
            raise UsageError("CheckpointWriter.save called after close()")
        started = time.perf_counter()
        # overlap_copy: the previous copy must be done before this snapshot is taken (its buffers may be the
        # ones reused here, and its order in the write queue must stay).
        self._settle_copies()  # a wait here is in this save's own stall
        self._raise_pending()
        self._slots.acquire()  # blocks only while ``buffers`` writes are in flight
        optimizers = (
            list(
                {
                    id(v): v
                    for v in (optimizer, *extra.values())
                    if isinstance(v, self._torch.optim.Optimizer)
                }.values()
            )
            if self.overlap_copy
            else []
        )
        try:
            self._raise_pending()
            obj: dict[str, Any] = {"step": int(step)}
            if model is not None:
                obj["model"] = state_of(model)
            if optimizer is not None:
                obj["optimizer"] = state_of(optimizer)
            for key, value in extra.items():
                obj[key] = state_of(value)
            snapshot = self._snapshot(int(step), obj, defer=guarded_storages(self._torch, optimizers))
        except BaseException:
            self._slots.release()
            raise
        target = self.directory / checkpoint_name(int(step))
        self._start_threads()
        if self.overlap_copy:
            pending = PendingCopy(stall_index=len(self.stall_seconds))
            if snapshot.deferred:
                guard = self._step_guard(pending)
                pending.handles = [opt.register_step_pre_hook(guard) for opt in optimizers]
            self._pending.append(pending)
            self._copies.put((snapshot, target, pending))
        else:
            self._jobs.put((snapshot, target))
        self.stall_seconds.append(time.perf_counter() - started)
        return target

    def wait(self) -> Path | None:
        """Block until the last save is on disk; raise SaveError if it failed. Returns the latest."""
        self._join()
        self._raise_pending()
        return read_latest(self.directory)

    def close(self) -> None:
        """Wait for the last write (raising its error, if any) and stop the background thread."""
        try:
            self.wait()
        finally:
            self._stop()

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if exc_info[0] is None:
            self.close()
        else:
            # Do not mask the caller's exception with a save error, but still let the write finish.
            self._stop()

    @property
    def latest(self) -> Path | None:
        return read_latest(self.directory)

    # -- snapshot ----------------------------------------------------------------------------------

    def _snapshot(self, step: int, obj: Any, defer: set[int]) -> Snapshot:
        """The snapshot of ``obj`` in the next buffer set (used in turn), device copies complete."""
        pool = self._pools[self._saves % len(self._pools)]
        self._saves += 1
        snapshot = take_snapshot(self._torch, pool, step, obj, defer)
        if self._cuda:
            self._torch.cuda.synchronize()
        return snapshot

    # -- overlapped copy (overlap_copy=True) -------------------------------------------------------

    def _step_guard(self, pending: PendingCopy) -> Any:
        def guard(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
            # Runs on the training thread at the top of optimizer.step(). It cannot remove itself here: torch
            # iterates the hook dict while calling it; _settle_copies removes it from save/wait/close.
            if pending.done.is_set():
                return
            began = time.perf_counter()
            pending.done.wait()
            self.stall_seconds[pending.stall_index] += time.perf_counter() - began

        return guard

    def _copy_deferred(self, snapshot: Snapshot) -> None:
        """Copy the deferred tensors into their buffers (the seam the tests slow down)."""
        for buf, tensor in snapshot.deferred:
            buf.copy_(tensor)

    def _copy_work(self) -> None:
        while (job := self._copies.get()) is not None:
            snapshot, target, pending = job
            try:
                self._copy_deferred(snapshot)
            except BaseException as exc:  # surfaced on the caller's next call; the step is let go
                self._error = exc
                self._error_step = snapshot.step
                self._slots.release()
            else:
                snapshot.deferred = []
                self._jobs.put((snapshot, target))  # before done: wait() joins the copies, then the writes
            finally:
                pending.done.set()
                self._copies.task_done()

    def _settle_copies(self) -> None:
        """Wait for overlapped copies in flight and remove their step hooks (on the training thread)."""
        while self._pending:
            pending = self._pending[0]
            pending.done.wait()
            for handle in pending.handles:
                handle.remove()
            self._pending.pop(0)

    def _start_threads(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._work, name="trainprobe-checkpoint-writer", daemon=True
            )
            self._thread.start()
        if self.overlap_copy and self._copier is None:
            self._copier = threading.Thread(
                target=self._copy_work, name="trainprobe-checkpoint-copier", daemon=True
            )
            self._copier.start()

    # -- background write --------------------------------------------------------------------------

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            snapshot, target = job
            try:
                self._write(snapshot, target)
            except BaseException as exc:  # surfaced on the caller's next call
                self._error = exc
                self._error_step = snapshot.step
            finally:
                self._slots.release()
                self._jobs.task_done()

    def _write(self, snapshot: Snapshot, target: Path) -> None:
        write_checkpoint(
            self._torch, snapshot.obj, snapshot.tensors, step=snapshot.step, target=target, fsync=self.fsync
        )
        rotate(self.directory, self.keep, current=target)

    def _join(self) -> None:
        self._settle_copies()
        self._copies.join()
        self._jobs.join()

    def _stop(self) -> None:
        self._join()
        self._closed = True
        if self._copier is not None:
            self._copies.put(None)
            self._copier.join()
            self._copier = None
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def _raise_pending(self) -> None:
        if self._error is None:
            return
        exc, step = self._error, self._error_step
        self._error = self._error_step = None
        raise SaveError(
            f"writing checkpoint for step {step} in {self.directory} failed: {type(exc).__name__}: {exc}",
            hint="the previous checkpoint and 'latest' are untouched; fix the cause and save again",
        ) from exc
