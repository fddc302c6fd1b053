"""The inert stand-in the safe unpickler builds for a class it does not reconstruct."""

from __future__ import annotations

from typing import Any


class Opaque:
    """An inert stand-in for an object of a class trainprobe does not reconstruct.

    The safe unpickler hands one of these (a subclass named after the global) for every class it does not
    know; whatever the pickle tries to do with it (call it, set its state, append items) is recorded, never
    executed."""

    __slots__ = ("args", "dict_items", "items", "kwargs", "state")
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    state: Any
    items: list[Any]
    dict_items: dict[Any, Any]
    module: str = ""
    qualname: str = ""
    # How often a pickle *called* this class (REDUCE ``cls(*args)``), which would run its constructor; NEWOBJ,
    # the way pickling an instance rebuilds it, only calls ``__new__``. Set per placeholder class.
    calls: int = 0

    def __new__(cls, *args: Any, **kwargs: Any) -> Opaque:
        obj = object.__new__(cls)
        obj.args = args
        obj.kwargs = kwargs
        obj.state = None
        obj.items = []
        obj.dict_items = {}
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Only a call reaches __init__ (pickle's NEWOBJ calls __new__ alone).
        self.args = args
        self.kwargs = kwargs
        if args or kwargs:
            type(self).calls += 1

    def __call__(self, *args: Any, **kwargs: Any) -> Opaque:
        # A pickle may call what an earlier call returned (getattr(__import__("os"), "system")(...)): inert.
        return type(self)(*args, **kwargs)

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: Any) -> None:
        self.items.extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.dict_items[key] = value

    @property
    def global_name(self) -> str:
        return f"{self.module}.{self.qualname}"

    def fields(self) -> dict[str, Any]:
        """The object's attributes as the pickle gave them (a dataclass's fields, a Namespace's entries)."""
        st = self.state
        if isinstance(st, tuple) and len(st) == 2 and (st[0] is None or isinstance(st[0], dict)):
            merged: dict[str, Any] = dict(st[0] or {})
            if isinstance(st[1], dict):
                merged.update(st[1])
            return merged
        if isinstance(st, dict):
            return dict(st)
        return dict(self.kwargs)

    def __repr__(self) -> str:
        return f"<{self.global_name} (not loaded)>"
