"""Framework knowledge, one module per framework, behind :class:`.base.Framework`.

To add a framework: write a module with a subclass of :class:`.base.FrameworkBase` that defines ``name``
and, unless its checkpoints are single files, ``layout`` (which directories are its units, and their parts),
and add its row to :data:`trainprobe.plugins.FRAMEWORKS` (``"module:Class"`` and what it writes, which
``check --help`` lists).
It overrides the base's answers where it knows more: ``counts`` (what each step source of its units counts,
beyond :data:`.base.STEP_COUNTS`), ``exact_steps``, ``name_counts``, ``covers_by_partition``, ``knows`` (a
single file's object is its own), ``tensor_role``, ``part_facts`` and ``parts_evidence``. Directory layouts
are asked in this order (more specific first); a single file's object is claimed by the first framework that
``knows`` it."""

from __future__ import annotations

from trainprobe import plugins
from trainprobe.checkpoint.units.frameworks.base import (
    Framework,
    FrameworkBase,
    Layout,
    Part,
    Role,
    TensorRole,
    role_by_name,
)
from trainprobe.plugins import instances

FRAMEWORKS: tuple[Framework, ...] = instances(__name__, plugins.FRAMEWORKS)

_BY_NAME = {f.name: f for f in FRAMEWORKS}


def framework_named(name: str) -> Framework:
    """The framework called ``name`` ("hf-model" is the Hugging Face one; unknown names: a plain file)."""
    if name == "hf-model":
        return _BY_NAME["hf-trainer"]
    return _BY_NAME.get(name, _BY_NAME["file"])


__all__ = [
    "FRAMEWORKS",
    "Framework",
    "FrameworkBase",
    "Layout",
    "Part",
    "Role",
    "TensorRole",
    "framework_named",
    "role_by_name",
]
