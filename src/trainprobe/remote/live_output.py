"""Live output of many targets at once: whole lines, each prefixed by a short label of its target."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from trainprobe.remote.target import SEPARATOR


def short_labels(targets: Sequence[str]) -> dict[str, str]:
    """A short label per target for prefixing output: the hops that differ between targets.

    ``ssh=node01//docker=trainer`` and ``ssh=node02//docker=trainer`` → ``ssh=node01`` and ``ssh=node02``.
    """
    split = [t.split(SEPARATOR) for t in targets]
    labels: dict[str, str] = {}
    for target, hops in zip(targets, split, strict=True):
        keep = [
            hop
            for i, hop in enumerate(hops)
            if len(targets) == 1 or any(len(other) <= i or other[i] != hop for other in split)
        ]
        labels[target] = SEPARATOR.join(keep) or target
    return labels


class LinePrefixer:
    """Turns live chunks from many targets into whole lines, each prefixed by its target's label.

    ``write(target, stream, data)`` can be passed as ``on_output``; complete lines go to
    ``emit(stream, line)`` (bytes, ending in a newline) under one lock, so lines of different targets never
    interleave mid-line.
    Call :meth:`flush` for a target when it ends, so a last line without a newline is not lost.
    """

    def __init__(self, targets: Sequence[str], emit: Callable[[str, bytes], None]) -> None:
        self._prefix: dict[str, bytes] = {}
        self._partial: dict[tuple[str, str], bytes] = {}
        self._emit = emit
        self._lock = threading.Lock()
        self.set_targets(targets)

    def set_targets(self, targets: Sequence[str]) -> None:
        """Relabel for the final list (pass as ``run_fleet(on_plan=...)``: a Slurm job becomes its nodes)."""
        labels = short_labels(targets)
        width = max((len(label) for label in labels.values()), default=0)
        with self._lock:
            self._prefix = {t: f"{label:<{width}} | ".encode() for t, label in labels.items()}

    def _label(self, target: str) -> bytes:
        return self._prefix.get(target) or f"{target} | ".encode()

    def write(self, target: str, stream: str, data: bytes) -> None:
        with self._lock:
            buffered = self._partial.pop((target, stream), b"") + data
            *lines, rest = buffered.split(b"\n")
            for line in lines:
                self._emit(stream, self._label(target) + line + b"\n")
            if rest:
                self._partial[(target, stream)] = rest

    def flush(self, target: str) -> None:
        with self._lock:
            for stream in ("stdout", "stderr"):
                rest = self._partial.pop((target, stream), b"")
                if rest:
                    self._emit(stream, self._label(target) + rest + b"\n")
