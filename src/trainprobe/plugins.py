"""Registries written as tables of names: a pluggable piece (a checkpoint framework, a log reader) is one
module holding one class, and its registry one row ``"module:Class"`` in its package's ``__init__``. Adding a
piece is one new file and one line; the registry's order is the order of its rows.

Standard library only: shipped to the far side with :mod:`trainprobe.errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any


def class_named(package: str, row: str) -> Any:
    """The class a ``"module:Class"`` row names, ``module`` under ``package`` (imported now)."""
    module, _, name = row.partition(":")
    return getattr(importlib.import_module(f"{package}.{module}"), name)


def instances(package: str, rows: Sequence[str | tuple[Any, ...]]) -> tuple[Any, ...]:
    """One instance of each class ``rows`` name (see :func:`class_named`), in the rows' order. A row may be
    a tuple, ``("module:Class", *arguments)``, for a class that is handed what it must not import."""
    made = []
    for row in rows:
        name, arguments = (row, ()) if isinstance(row, str) else (row[0], row[1:])
        made.append(class_named(package, name)(*arguments))
    return tuple(made)
