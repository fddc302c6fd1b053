"""The parts a framework's save always writes (:class:`~trainprobe.checkpoint.units.frameworks.base.Need`),
held against the parts a unit has: a Trainer's ``checkpoint-N/`` without its model, or with ``scheduler.pt``
and no ``optimizer.pt``, reads clean file by file, yet the framework's own resume refuses it or goes on with a
fresh optimizer. One absent is damage (corrupt). Stdlib only."""

from __future__ import annotations

import os
from collections.abc import Sequence

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.units.frameworks.base import Framework, Part, Role, role_by_name


def _role_below(folder: str, role: Role) -> bool:
    """Whether a sub-folder of ``folder`` holds a file of ``role`` (a model a save hook wrote by itself,
    DeepSpeed's model and optimizer states under accelerate's ``pytorch_model/``)."""
    try:
        subs = [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        return any(
            role_by_name(f) == role for sub in subs for f in os.listdir(sub) if not f.endswith(".json")
        )
    except OSError:
        return False


def missing_part_evidence(
    unit_path: str,
    parts: Sequence[Part],
    others: Sequence[str],
    framework: Framework,
    *,
    here: bool,
) -> list[Evidence]:
    """A failed check for each part ``framework.needs`` that the unit lacks (``others``: its files that are
    no part — side files, files of a checkpoint's name no reader claims — which are there all the same);
    ``here``: the unit is on this machine, so a part saved in a sub-folder is looked for."""
    roles: set[Role] = {p.role for p in parts} | {role_by_name(p) for p in others}
    names = {os.path.basename(p.path) for p in parts} | {os.path.basename(p) for p in others}
    out = []
    for need in framework.needs:
        there = names & set(need.names) if need.names else need.role in roles
        if there or (need.when and not roles & set(need.when)):
            continue
        if not need.names and here and _role_below(unit_path, need.role):
            continue
        had = f" (it has {', '.join(sorted(roles & set(need.when)))})" if need.when else ""
        out.append(
            Evidence(
                "required-parts", "fail",
                f"no {need.what}{had}: every {framework.name} save writes one; {need.why}",
                indicates=V.CORRUPT, values={"missing": need.what},
            )
        )  # fmt: skip
    return out


__all__ = ["missing_part_evidence"]
