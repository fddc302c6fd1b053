"""Find every tensor in an unpickled object and give it its dotted name; build the skeleton the rest of
trainprobe reads.

``torch.load`` returns every tensor the pickle reaches, wherever it is: in dicts and lists, as a dict key,
in a set, in a placeholder's arguments or state, a thousand levels down. So the walk visits all of them,
with an explicit stack (no recursion limit), and names what it finds by its path:
``model.layers.3.weight``, ``cache.<key 0>`` for a dict key, ``seen.<item 1>`` for a set member,
``obj.<arg 0>`` for a constructor argument. A name longer than :data:`MAX_NAME` characters keeps its start
and its last key (``a.b.c…<100000 levels>….weight``): names cost no more than the pickle's depth allows.

The skeleton it returns is a tree, safe for any naive walker: each container of the pickle appears once (a
later reference to one holding other containers, or a cycle, becomes an :class:`Elided` marker), and nothing
below :data:`SKELETON_DEPTH` levels is kept in it (the tensors there are still found and named). A pickle's
shared references cannot make it exponential, nor its depth a RecursionError. A tensor referenced twice (tied
weights) is named at each place. Dicts and lists are converted in place (the unpickled object is ours).

Tensors the pickle built but that no path reaches (dropped by a rebuild function, popped off the stack) are
returned apart, for the reader to check them anyway: nothing the file holds is skipped."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trainprobe.checkpoint.reading.base import TensorRecord, brief, check_tensor_count
from trainprobe.checkpoint.reading.pickle.opaque import Opaque
from trainprobe.checkpoint.reading.pickle.rebuild import TensorRef

#: Below this many levels the skeleton holds an :class:`Elided` marker (the tensors there are still named).
SKELETON_DEPTH = 100
#: Tensor names are cut to this many characters (plus the depth and the last key).
MAX_NAME = 400
# A container seen again is reused in the skeleton when it holds at most this many values, none a container:
# small enough that reusing it cannot multiply a walker's work (an enum member a config names twice).
_SMALL = 16

_LEAVES = (str, bytes, bytearray, int, float, complex, bool, type(None))
# The exact types of _LEAVES, for the walk's fast path (a subclass goes the long way, with the same result).
_LEAF_TYPES = frozenset(_LEAVES)


class Elided:
    """Where the skeleton leaves out what the pickle has: a second reference to a container, a cycle, or
    everything deeper than :data:`SKELETON_DEPTH`. ``reason`` says which; tensors inside are named at their
    first path."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<{self.reason}>"


_SHARED = "an object the pickle holds more than once (kept at its first place)"
_CYCLE = "a cycle back to an object that contains it"
_DEEP = f"nested deeper than {SKELETON_DEPTH} levels"


def _label(key: Any) -> str:
    if isinstance(key, str):
        return key if len(key) <= 200 else key[:80] + "…"
    if isinstance(key, int) and not isinstance(key, bool) and abs(key) < 1 << 64:
        return str(key)
    if isinstance(key, TensorRef):
        return "<a tensor>"
    return brief(key, 80)


def _child(path: str, key: Any, depth: int) -> str:
    label = _label(key)
    if not path:
        return label
    if len(path) <= MAX_NAME:
        return f"{path}.{label}"
    return f"{path[:MAX_NAME].rsplit('…', 1)[0]}…<{depth} levels>….{label}"


def _pair_state(state: Any) -> bool:
    """A ``(dict, slots dict)`` state, as objects with ``__slots__`` pickle: its entries are named like a
    dict state's (``obj.field``)."""
    return (
        isinstance(state, tuple)
        and len(state) == 2
        and all(part is None or isinstance(part, dict) for part in state)
    )


# How a frame names its children: by index (a list, a tuple), by key (a dict, whose values are its keys and
# values in turn), or from a list of labels (None: the container's own name).
_BY_INDEX, _BY_KEY, _LABELLED = 0, 1, 2

_KEY_LABELS: list[str] = []


def _key_labels(n: int) -> list[str]:
    """``<key 0>``, ``<key 1>``, ...: made once, not for every dict of a checkpoint."""
    if len(_KEY_LABELS) < n:
        _KEY_LABELS.extend(f"<key {i}>" for i in range(len(_KEY_LABELS), n))
    return _KEY_LABELS


def _children(obj: Any) -> tuple[int, Sequence[Any], list[Any]] | None:
    """What ``obj`` holds, in the order :func:`_rebuild` expects, and how they are named: (kind, values,
    labels); None for a leaf. Lists and tuples are their own values and dicts one flat list (no tuple per
    child: the allocations alone made the garbage collector a tenth of a scan of 8,000 tensors)."""
    if isinstance(obj, dict):
        _key_labels(len(obj))
        return _BY_KEY, [x for item in obj.items() for x in item], _KEY_LABELS
    if isinstance(obj, (list, tuple)):
        return _BY_INDEX, obj, []
    if isinstance(obj, (set, frozenset)):
        # Set order follows hashes (ids, for tensors): tensors go by when the pickle built them.
        members = sorted(obj, key=lambda m: (0, m.serial) if isinstance(m, TensorRef) else (1, 0))
        return _LABELLED, members, [f"<item {i}>" for i in range(len(members))]
    if isinstance(obj, Opaque):
        labels: list[Any] = [f"<arg {i}>" for i in range(len(obj.args))]
        values: list[Any] = [*obj.args, obj.kwargs]
        # A dict state's keys name its tensors, as a module's attributes do: ``path.key``.
        state = obj.state
        values.extend([state[0], state[1]] if _pair_state(state) else [state])
        values.extend([obj.items, obj.dict_items])
        labels.extend([None] * (len(values) - len(labels)))
        return _LABELLED, values, labels
    return None


def _rebuild(obj: Any, results: list[Any]) -> Any:
    """The skeleton's version of ``obj`` from its converted children: dicts, lists and placeholders are
    updated in place, tuples and sets rebuilt."""
    if isinstance(obj, dict):
        if all(results[i] is k for i, k in zip(range(0, len(results), 2), obj, strict=True)):
            for i, k in zip(range(0, len(results), 2), list(obj), strict=True):
                obj[k] = results[i + 1]
            return obj
        out = type(obj)() if type(obj) is not dict else {}
        for i in range(0, len(results), 2):
            try:
                out[results[i]] = results[i + 1]
            except TypeError:  # a key whose converted form is unhashable: kept by its text
                out[brief(results[i])] = results[i + 1]
        return out
    if isinstance(obj, list):
        obj[:] = results
        return obj
    if isinstance(obj, tuple):
        return tuple(results)
    if isinstance(obj, (set, frozenset)):
        try:
            return frozenset(results) if isinstance(obj, frozenset) else set(results)
        except TypeError:
            return results
    if isinstance(obj, Opaque):
        n = len(obj.args)
        obj.args = tuple(results[:n])
        obj.kwargs = results[n]
        if _pair_state(obj.state):
            obj.state = (results[n + 1], results[n + 2])
            n += 1
        else:
            obj.state = results[n + 1]
        obj.items, obj.dict_items = results[n + 2], results[n + 3]
        return obj
    return obj


class _Frame:
    """One container being walked: what it holds, and what that became in the skeleton so far."""

    __slots__ = ("build", "depth", "kind", "labels", "nested", "obj", "path", "results", "values")

    def __init__(
        self, obj: Any, path: str, depth: int, build: bool, children: tuple[int, Sequence[Any], list[Any]]
    ) -> None:
        self.obj = obj
        self.path = path
        self.depth = depth
        self.build = build  # False below SKELETON_DEPTH: tensors are searched for, nothing is kept
        self.kind, self.values, self.labels = children
        self.results: list[Any] = []
        self.nested = False  # a child is a container (then a second reference to this one is elided)


def name_tensors(
    root: Any,
    to_record: Callable[[TensorRef, str], TensorRecord],
    *,
    built: Iterable[TensorRef] = (),
    path: str = "",
) -> tuple[Any, list[TensorRecord], list[TensorRef]]:
    """Walk ``root``: (the skeleton with a TensorRecord in place of each TensorRef, the records in the order
    met, the tensors of ``built`` that no path reached). ``path`` names the file in errors. Raises
    ReaderLimitError past the per-file tensor limit."""
    walk = _Walk(to_record, path)
    skeleton = walk.run(root, "", 0, True)
    while walk.extras:
        name, extra = walk.extras.pop()
        walk.run(extra, name, SKELETON_DEPTH + 2, False)
    unreached = [ref for ref in built if id(ref) not in walk.reached]
    check_tensor_count(path, len(walk.records) + len(unreached))
    return skeleton, walk.records, unreached


class _Walk:
    """One walk of a skeleton with an explicit stack (no recursion, whatever the depth): the records met, the
    tensors reached, each container's skeleton version when small enough to reuse, the containers being
    walked (a cycle), and the tensors' own extras (a quantizer's scales: walked afterwards)."""

    def __init__(self, to_record: Callable[[TensorRef, str], TensorRecord], path: str) -> None:
        self.to_record, self.path = to_record, path
        self.records: list[TensorRecord] = []
        self.reached: set[int] = set()
        self.done: dict[int, Any] = {}  # id -> its skeleton version when small enough to reuse, else Elided
        self.open_ids: set[int] = set()
        self.extras: list[tuple[str, Any]] = []

    def visit(self, value: Any, name: str, depth: int, build: bool, stack: list[_Frame]) -> tuple[Any, bool]:
        """(the skeleton value, whether a frame was pushed that delivers it later)."""
        if isinstance(value, TensorRef):
            self.reached.add(id(value))
            rec = self.to_record(value, name or "<root>")
            self.records.append(rec)
            if len(self.records) % 1024 == 0:
                check_tensor_count(self.path, len(self.records))
            if value.extra:
                self.extras.append((name, value.extra))
            return rec, False
        if isinstance(value, _LEAVES):
            return value, False
        key = id(value)
        if key in self.open_ids:
            return Elided(_CYCLE), False
        if key in self.done:
            again = self.done[key]
            return (again if build else Elided(_SHARED)), False
        children = _children(value)
        if children is None:
            return value, False
        self.open_ids.add(key)
        stack.append(_Frame(value, name, depth, build and depth <= SKELETON_DEPTH, children))
        return None, True

    def run(self, value: Any, name: str, depth: int, build: bool) -> Any:
        stack: list[_Frame] = []
        visit = self.visit
        result, _pushed = visit(value, name, depth, build, stack)
        leaf_types = _LEAF_TYPES
        while stack:
            frame = stack[-1]
            values, results, kind = frame.values, frame.results, frame.kind
            # Children that are plain values (most dict keys, ints, strings) are copied without a name
            # being built for them: only tensors and containers need one.
            pushed = False
            for index in range(len(results), len(values)):
                child = values[index]
                if type(child) in leaf_types:
                    results.append(child)
                    continue
                if kind == _BY_INDEX:
                    label: Any = index
                elif kind == _BY_KEY:  # a key is named <key i>, a value by its key
                    label = values[index - 1] if index & 1 else frame.labels[index >> 1]
                else:
                    label = frame.labels[index]
                child_name = frame.path if label is None else _child(frame.path, label, frame.depth + 1)
                converted, pushed = visit(child, child_name, frame.depth + 1, frame.build, stack)
                if pushed:
                    break
                results.append(converted)
                frame.nested = frame.nested or not isinstance(converted, (*_LEAVES, TensorRecord))
            if pushed:
                continue
            stack.pop()
            out = self._finish(frame)
            if stack:
                stack[-1].results.append(out)
                stack[-1].nested = True
            else:
                result = out
        return result

    def _finish(self, frame: _Frame) -> Any:
        """A walked container's skeleton version, kept for reuse when it is small and flat."""
        self.open_ids.discard(id(frame.obj))
        if frame.build:
            out: Any = _rebuild(frame.obj, frame.results)
        else:
            out = Elided(_DEEP) if frame.depth == SKELETON_DEPTH + 1 else None
        small = frame.build and not frame.nested and len(frame.results) <= _SMALL
        self.done[id(frame.obj)] = out if small else Elided(_SHARED)
        return out
