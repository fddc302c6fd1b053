"""A save's private copy of the training state: every tensor copied into CPU buffers that are kept between
saves, so that what is written later is the state at ``save`` time, whatever training does meanwhile.

With ``overlap_copy`` the CPU tensors only ``optimizer.step()`` changes are not copied now: their buffers go
into the snapshot, and the (buffer, live tensor) pairs are left for the background copy (:class:`Snapshot`
``deferred``). torch is passed in, never imported here.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Snapshot:
    step: int
    obj: Any
    #: flattened tensor paths ("model.fc.weight", "optimizer.state.0.exp_avg") -> CPU tensor
    tensors: dict[str, Any] = field(default_factory=dict)
    #: overlap_copy: (CPU buffer, live tensor) pairs still to copy; the buffers are already in ``obj``
    deferred: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass
class PendingCopy:
    """An overlapped copy in flight; ``done`` is set once every deferred tensor is copied (or the copy
    failed)."""

    stall_index: int
    done: threading.Event = field(default_factory=threading.Event)
    #: the step pre-hooks that hold ``optimizer.step()`` until ``done``; removed from the training thread
    handles: list[Any] = field(default_factory=list)


class BufferPool:
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


def deferrable(torch: Any, value: Any) -> bool:
    """overlap_copy moves only dense, non-empty CPU tensors to the background copy; CUDA and others are
    copied before ``save`` returns."""
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.layout == torch.strided
        and value.numel() > 0
    )


def state_of(obj: Any) -> Any:
    """A module's or optimizer's ``state_dict()``; anything else as it is."""
    return obj.state_dict() if hasattr(obj, "state_dict") and callable(obj.state_dict) else obj


def guarded_storages(torch: Any, optimizers: list[Any]) -> set[int]:
    """Storage addresses of the CPU tensors only ``optimizer.step()`` changes: parameters and state of the
    optimizers whose next step the hook holds."""
    found: set[int] = set()

    def add(value: Any) -> None:
        if deferrable(torch, value):
            found.add(value.untyped_storage().data_ptr())

    for opt in optimizers:
        for group in opt.param_groups:
            for param in group["params"]:
                add(param)
        for state in opt.state.values():
            for value in state.values() if isinstance(state, dict) else ():
                add(value)
    return found


def take_snapshot(
    torch: Any, pool: BufferPool, step: int, obj: Any, defer: set[int] | None = None
) -> Snapshot:
    """``obj`` with every tensor copied into ``pool``'s buffers (those whose storage is in ``defer`` left for
    the background copy) and every plain value deep-copied."""
    snapshot = Snapshot(step=step, obj=None)
    copied: dict[int, Any] = {}  # tied weights stay tied: one tensor object, one copy

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, torch.Tensor):
            if id(value) in copied:
                return copied[id(value)]
            if defer and deferrable(torch, value) and value.untyped_storage().data_ptr() in defer:
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
    return snapshot
