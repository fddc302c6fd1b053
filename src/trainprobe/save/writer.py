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
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
import hashlib
import json
import os
import queue
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprobe.checkpoint.units.manifest import build_manifest
from trainprobe.conventions import LATEST_NAME, MANIFEST_SUFFIX, TEMP_MARK
from trainprobe.errors import SaveError, UsageError, missing_extra

_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def manifest_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + MANIFEST_SUFFIX)


def read_latest(directory: str | os.PathLike[str]) -> Path | None:
    """The checkpoint the ``latest`` pointer in ``directory`` names, or None when there is no pointer yet."""
    pointer = Path(directory) / LATEST_NAME
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return Path(directory) / name if name else None


def import_torch(needed_by: str = "CheckpointWriter") -> Any:
    """torch, imported on first use (``import trainprobe.save`` works without it); a MissingExtraError naming
    the torch extra when it is not installed."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the test extra
        raise missing_extra("torch", extra="torch", needed_by=needed_by) from None
    return torch


def _fsync_dir(directory: Path) -> None:
    # Without this, a power loss after os.replace can forget the rename even though the data is on disk.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _hash_only(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _fsync_and_hash(path: Path) -> tuple[str, int]:
    """fsync ``path`` and return its sha256 and size, read back from the page cache.

    torch.save is given the path, not a Python file object: its C++ writer then writes without calling back
    into Python for every record, which (measured) interferes less with the training thread; hashlib releases
    the GIL on large chunks.
    """
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    return _hash_only(path)


@dataclass
class _Snapshot:
    step: int
    obj: Any
    #: flattened tensor paths ("model.fc.weight", "optimizer.state.0.exp_avg") -> CPU tensor
    tensors: dict[str, Any] = field(default_factory=dict)
    #: overlap_copy: (CPU buffer, live tensor) pairs still to copy; the buffers are already in ``obj``
    deferred: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass
class _PendingCopy:
    """An overlapped copy in flight; ``done`` is set once every deferred tensor is copied (or the copy
    failed)."""

    stall_index: int
    done: threading.Event = field(default_factory=threading.Event)
    #: the step pre-hooks that hold ``optimizer.step()`` until ``done``; removed from the training thread
    handles: list[Any] = field(default_factory=list)


class _BufferPool:
    """CPU tensors reused between saves, one per tensor path, so a save allocates nothing in steady state."""

    def __init__(self, torch: Any, pin: bool) -> None:
        self._torch = torch
        self._pin = pin
        self._buffers: dict[str, Any] = {}

    def buffer(self, path: str, tensor: Any) -> Any:
        buf = self._buffers.get(path)
        if buf is None or buf.shape != tensor.shape or buf.dtype != tensor.dtype:
            buf = self._torch.empty(
                tuple(tensor.shape), dtype=tensor.dtype, device="cpu", pin_memory=self._pin
            )
            self._buffers[path] = buf
        return buf

    def copy(self, path: str, tensor: Any) -> Any:
        buf = self.buffer(path, tensor)
        # non_blocking only overlaps device->host copies; a synchronize before save() returns makes them
        # complete.
        buf.copy_(tensor.detach(), non_blocking=self._pin)
        return buf


def _deferrable(torch: Any, value: Any) -> bool:
    """overlap_copy moves only dense, non-empty CPU tensors to the background copy; CUDA and others are
    copied before ``save`` returns."""
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.layout == torch.strided
        and value.numel() > 0
    )


def _state(obj: Any) -> Any:
    return obj.state_dict() if hasattr(obj, "state_dict") and callable(obj.state_dict) else obj


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
        self._pools = [_BufferPool(self._torch, pin=self._cuda) for _ in range(buffers)]
        self._slots = threading.Semaphore(buffers)
        self._saves = 0
        # One long-lived worker: starting a thread per save costs tens of milliseconds on a busy machine
        # (Thread.start waits for the new thread to get the GIL), which would all be stall.
        self._thread: threading.Thread | None = None
        self._jobs: queue.Queue[tuple[_Snapshot, Path] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._error_step: int | None = None
        self._closed = False
        self.overlap_copy = overlap_copy
        # overlap_copy: a second thread copies, so a copy never queues behind the previous file's write.
        self._copier: threading.Thread | None = None
        self._copies: queue.Queue[tuple[_Snapshot, Path, _PendingCopy] | None] = queue.Queue()
        self._pending: list[_PendingCopy] = []
        #: seconds each save() blocked the caller (waiting for the previous write plus the copy); with
        #: overlap_copy also the time the next hooked ``optimizer.step()`` waited for the copy
        self.stall_seconds: list[float] = []
        self._remove_stale_temps()

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
                obj["model"] = _state(model)
            if optimizer is not None:
                obj["optimizer"] = _state(optimizer)
            for key, value in extra.items():
                obj[key] = _state(value)
            snapshot = self._snapshot(int(step), obj, defer=self._guarded_storages(optimizers))
        except BaseException:
            self._slots.release()
            raise
        target = self.directory / checkpoint_name(int(step))
        self._start_threads()
        if self.overlap_copy:
            pending = _PendingCopy(stall_index=len(self.stall_seconds))
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

    def _guarded_storages(self, optimizers: list[Any]) -> set[int]:
        """Storage addresses of the CPU tensors only ``optimizer.step()`` changes: parameters and state of
        the optimizers whose next step the hook holds."""
        torch = self._torch
        found: set[int] = set()

        def add(value: Any) -> None:
            if _deferrable(torch, value):
                found.add(value.untyped_storage().data_ptr())

        for opt in optimizers:
            for group in opt.param_groups:
                for param in group["params"]:
                    add(param)
            for state in opt.state.values():
                for value in state.values() if isinstance(state, dict) else ():
                    add(value)
        return found

    def _snapshot(self, step: int, obj: Any, defer: set[int] | None = None) -> _Snapshot:
        torch = self._torch
        snapshot = _Snapshot(step=step, obj=None)
        pool = self._pools[self._saves % len(self._pools)]
        self._saves += 1
        copied: dict[int, Any] = {}  # tied weights stay tied: one tensor object, one copy

        def walk(value: Any, path: str) -> Any:
            if isinstance(value, torch.Tensor):
                if id(value) in copied:
                    return copied[id(value)]
                if defer and _deferrable(torch, value) and value.untyped_storage().data_ptr() in defer:
                    buf = pool.buffer(path, value)
                    snapshot.deferred.append((buf, value.detach()))
                else:
                    buf = pool.copy(path, value)
                copied[id(value)] = buf
                snapshot.tensors[path] = buf
                return buf
            if isinstance(value, dict):
                return type(value)((k, walk(v, f"{path}.{k}" if path else str(k))) for k, v in value.items())
            if isinstance(value, list):
                return [walk(v, f"{path}.{i}") for i, v in enumerate(value)]
            if isinstance(value, tuple) and not hasattr(value, "_fields"):
                return tuple(walk(v, f"{path}.{i}") for i, v in enumerate(value))
            # Plain values (numbers, strings, small objects) are copied now so later mutation cannot reach the
            # file; one that refuses to be copied is written as it is at write time (and fails there if it
            # cannot be).
            try:
                return copy.deepcopy(value)
            except Exception:
                return value

        snapshot.obj = walk(obj, "")
        if self._cuda:
            torch.cuda.synchronize()
        return snapshot

    # -- overlapped copy (overlap_copy=True) -------------------------------------------------------

    def _step_guard(self, pending: _PendingCopy) -> Any:
        def guard(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
            # Runs on the training thread at the top of optimizer.step(). It cannot remove itself here: torch
            # iterates the hook dict while calling it; _settle_copies removes it from save/wait/close.
            if pending.done.is_set():
                return
            began = time.perf_counter()
            pending.done.wait()
            self.stall_seconds[pending.stall_index] += time.perf_counter() - began

        return guard

    def _copy_deferred(self, snapshot: _Snapshot) -> None:
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

    def _write(self, snapshot: _Snapshot, target: Path) -> None:
        torch = self._torch
        tmp = target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}")
        try:
            torch.save(snapshot.obj, str(tmp))
            digest, size = _fsync_and_hash(tmp) if self.fsync else _hash_only(tmp)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        tensors = {}
        for name, t in snapshot.tensors.items():
            finite = bool(torch.isfinite(t).all()) if (t.is_floating_point() or t.is_complex()) else True
            tensors[name] = {
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "finite": finite,
            }
        manifest = build_manifest(
            step=snapshot.step,
            file=target.name,
            size=size,
            sha256=digest,
            created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            tensors=tensors,
        )
        _write_atomic_text(manifest_path(target), json.dumps(manifest, indent=1) + "\n")
        if self.fsync:
            _fsync_dir(self.directory)
        _write_atomic_text(self.directory / LATEST_NAME, target.name + "\n")
        if self.fsync:
            _fsync_dir(self.directory)
        self._rotate(current=target)

    def _rotate(self, current: Path) -> None:
        if self.keep is None:
            return
        complete = sorted(self._complete_checkpoints(), key=lambda item: item[0])
        excess = len(complete) - self.keep
        for _step, path in complete:
            if excess <= 0:
                break
            if path == current:
                continue
            # The manifest goes last: a checkpoint without a manifest is never mistaken for a verified one.
            path.unlink(missing_ok=True)
            manifest_path(path).unlink(missing_ok=True)
            excess -= 1

    def _complete_checkpoints(self) -> Iterator[tuple[int, Path]]:
        for entry in self.directory.iterdir():
            match = _STEP_FILE.match(entry.name)
            if match and manifest_path(entry).exists():
                yield int(match.group(1)), entry

    def _remove_stale_temps(self) -> None:
        # Left by a process killed mid-write; never visible under a checkpoint's name.
        for entry in self.directory.iterdir():
            if not (entry.name.startswith(".") and TEMP_MARK in entry.name):
                continue
            pid = entry.name.rsplit(TEMP_MARK, 1)[1]
            if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
                continue  # another live writer's file in progress
            with contextlib.suppress(OSError):
                entry.unlink()

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
