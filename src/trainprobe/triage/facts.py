"""The log's facts that need the units beside it (:mod:`trainprobe.metrics.log_facts` decides them): save
lines that name another directory than the units', units no save line wrote, saves not on disk. Here only
the triage's saves and units are handed over as the plain data those functions take."""

from __future__ import annotations

from trainprobe.metrics.log_facts import (
    LogFact,
    saves_elsewhere,
    saves_without_unit,
    units_without_save_line,
)
from trainprobe.triage.model import CheckpointInfo, SaveMatch


def unit_facts(
    saves: list[SaveMatch], units: list[CheckpointInfo], saved_paths: dict[str, str | None]
) -> list[LogFact]:
    """``saved_paths``: each absolute path a save line names, resolved where the files are (None where
    nothing is there), so a path through a symbolic link to the units' directory is the same place."""
    by_rel = {u.relpath: u for u in units}
    named = [
        (saved_paths.get(s.path) or s.path, by_rel[s.unit].path) for s in saves if s.path and s.unit in by_rel
    ]
    saved = {s.unit for s in saves if s.unit}
    copies = {
        u.relpath: next(r for r in u.identical_to if r in saved)
        for u in units
        if u.relpath not in saved and any(r in saved for r in u.identical_to)
    }
    return (
        saves_elsewhere(named)
        + units_without_save_line([u.relpath for u in units if u.relpath not in saved], copies, len(saves))
        + saves_without_unit(
            [s.step for s in saves if s.unit is None], [float(u.step) for u in units if u.step is not None]
        )
    )
