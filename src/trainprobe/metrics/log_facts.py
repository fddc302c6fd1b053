"""What a log says about itself, beside its anomalies: facts that change how far its numbers and its save
lines can be trusted. Each is one sentence for ``logs`` and for ``triage``'s answer (``LogFact.text``).

From the log alone (:func:`log_facts`):

- **constant series** — a throughput, a step time or a loss written with the same value on every row
  (at least :data:`MIN_ROWS`, the value with at least :data:`MIN_DIGITS` significant digits, not 0): a
  measured rate cannot be 51234 on 5,000 lines and across stalls, so it is a constant someone prints, not a
  measurement. A setting printed on every line (a learning rate, a batch size, a counter) is no such fact,
  and neither is a rounded value (``0.2 s/it``: two digits cannot show a change).
- **irregular save cadence** — the save lines keep a round cadence (the round number, 10 to 9×10^k or
  25×10^k, that divides the most of their steps, at least half; the largest of those) and a save is one or
  two steps off it (2000, then 4001; 20, 40, 60, 81, 100): a counting slip or a save triggered by something
  else, which matters when the save's step is taken from its name. A save at the run's last logged step (the
  final save) is never off cadence.

From the log and the checkpoint units beside it (triage; plain data in, so the far side's JSON does):

- **saves named elsewhere** (:func:`saves_elsewhere`) — the save lines name another directory than where
  the units are (``/root/ckpts/step_2000`` for ``/data/copy/ckpts/step_2000``): a copied or moved run, so the
  units' file times are when they were copied, not when they were saved.
- **units without a save line** (:func:`units_without_save_line`) — when the log records saves, a unit no
  save line wrote was put there by something else (a copy, another job, a save by hand).
- **save lines without a unit** (:func:`saves_without_unit`) — a save the log records that is not on disk:
  later than every unit (it did not finish, or the run was copied before it), or between units when nothing
  shows a rotation (a save older than the oldest unit missing is a rotation that keeps the newest few, and
  a gap between kept units is then one too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainprobe.conventions import step_json, step_text
from trainprobe.metrics.events import CHECKPOINT_SAVE
from trainprobe.metrics.roles import METRIC, TIMING, metric_kind
from trainprobe.metrics.table import RunLog

CONSTANT_SERIES = "constant-series"
IRREGULAR_CADENCE = "irregular-cadence"
SAVES_ELSEWHERE = "saves-named-elsewhere"
UNIT_WITHOUT_SAVE_LINE = "unit-without-save-line"
SAVE_LINE_WITHOUT_UNIT = "save-line-without-unit"

MIN_ROWS = 20
MIN_DIGITS = 3
# A save this many steps from its cadence is a slip; farther is another rhythm (an epoch end, a final save).
_OFF_BY = 2
_SHOWN = 4


@dataclass(frozen=True)
class LogFact:
    """One fact: its kind (the constants above), the sentence, and where (run, metric, steps) when it has
    one."""

    kind: str
    text: str
    run: str = ""
    metric: str = ""
    steps: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "run": self.run,
            "metric": self.metric,
            "steps": [step_json(s) for s in self.steps],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LogFact:
        return cls(
            str(data["kind"]),
            str(data["text"]),
            str(data.get("run", "")),
            str(data.get("metric", "")),
            tuple(float(s) for s in data.get("steps", [])),
        )


def log_facts(runs: Iterable[RunLog]) -> list[LogFact]:
    """The facts of the logs alone, run by run: constant series, then an irregular save cadence."""
    out: list[LogFact] = []
    for run in runs:
        out.extend(constant_series(run))
        out.extend(irregular_cadence(run))
    return out


def _digits(value: float) -> int:
    """Significant digits of a value as a log prints it (``51234`` 5, ``0.20`` 1, ``3.1`` 2)."""
    mantissa = f"{abs(value):.6e}".split("e")[0].replace(".", "")
    return len(mantissa.rstrip("0")) or 1


def _watched_for_constancy(run: RunLog, column: str) -> bool:
    """A timing (a rate or a duration: measured, so it moves) or a loss; settings and counters never."""
    kind = metric_kind(column)
    role = run.role(column)
    return (role == TIMING and kind == "time") or (role == METRIC and kind == "loss")


def _stalls(run: RunLog) -> int:
    """Gaps in the log's clock ten times its usual pace (and over a second): the loop stood still there."""
    if run.wall is None:
        return 0
    wall = run.wall[np.isfinite(run.wall)]
    if wall.size < 3:
        return 0
    gaps = np.diff(wall)
    pace = float(np.median(gaps))
    return int(np.count_nonzero(gaps > max(10 * pace, 1.0)))


def constant_series(run: RunLog) -> list[LogFact]:
    """A timing or a loss with one value, of enough digits to move, on every row it is written."""
    out: list[LogFact] = []
    for column, values in run.columns.items():
        if not _watched_for_constancy(run, column):
            continue
        written = values[run.mask(column) & np.isfinite(values)]
        if written.size < MIN_ROWS or not bool(np.all(written == written[0])):
            continue
        value = float(written[0])
        if value == 0 or _digits(value) < MIN_DIGITS:
            continue
        stalls = _stalls(run)
        across = f", even across the log's {stalls} stall(s)" if stalls else ""
        what = (
            "a loss that never moves is not computed from the batches (or nothing trains)"
            if metric_kind(column) == "loss"
            else "a measured rate or time moves; this one is a constant written to the log, not a measurement"
        )
        out.append(
            LogFact(
                CONSTANT_SERIES,
                f"{column} is {value:g} on every one of its {written.size:,} rows{across}: {what}",
                run.name,
                column,
                (float(run.steps[0]), float(run.steps[-1])),
            )
        )
    return out


def _round_numbers(limit: float) -> list[int]:
    """10, 15, 20, 25, 30, ..., 90, then the same times 10, 100, ... up to ``limit``: the cadences people
    choose, largest first."""
    out: list[int] = []
    power = 1
    while 10 * power <= limit:
        out.extend(m * power for m in (10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90) if m * power <= limit)
        power *= 10
    return sorted(out, reverse=True)


def _save_steps(run: RunLog) -> list[float]:
    return sorted(
        {e.step for e in run.events if e.kind == CHECKPOINT_SAVE and math.isfinite(e.step) and e.step > 0}
    )


def irregular_cadence(run: RunLog) -> list[LogFact]:
    """Saves one or two steps off the round cadence the others keep (see the module doc)."""
    steps = _save_steps(run)
    if len(steps) < 2:
        return []
    last_logged = float(np.nanmax(run.steps)) if len(run) else math.inf
    # The cadence that explains the most saves, the largest of those: a larger one that divides only half of
    # them (40 for 20, 40, 60, 81, 100) would leave the slip it should show more than two steps off.
    kept = {g: sum(s % g == 0 for s in steps) for g in _round_numbers(max(steps))}
    most = max(kept.values(), default=0)
    if 2 * most < len(steps):
        return []
    cadence = next(g for g, n in kept.items() if n == most)
    off = []
    for s in steps:
        nearest = round(s / cadence) * cadence
        if 0 < abs(s - nearest) <= _OFF_BY and nearest >= cadence and s != last_logged:
            off.append((s, s - nearest))
    if not off:
        return []
    shown = ", ".join(step_text(s) for s in steps[:8]) + (", …" if len(steps) > 8 else "")
    slips = "; ".join(
        f"the one at step {step_text(s)} is {step_text(abs(d))} step(s) off it "
        f"({'after' if d > 0 else 'before'} {step_text(s - d)})"
        for s, d in off[:_SHOWN]
    )
    return [
        LogFact(
            IRREGULAR_CADENCE,
            f"the save cadence is irregular: the saves (at steps {shown}) follow a cadence of {cadence} "
            f"steps, but {slips}: a counting slip or another trigger, and a step read from such a save's "
            "name is off as much",
            run.name,
            "",
            tuple(s for s, _ in off),
        )
    ]


# -- with the units on disk ---------------------------------------------------------------------------------


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]


def _prefixes(named: str, unit: str) -> tuple[str, str]:
    """The directories a save line's path and a unit's path sit in, once the names they share at their end
    are taken off: equal when the line names where the unit is. The line may name the unit, its folder or a
    file in it, or a sibling folder (``step_20`` for a unit filed in ``step_25``): the longest shared tail of
    the path or its folder, against the unit, its folder or the folder above, is taken off."""
    p, u = _parts(named), _parts(unit)
    best = (0, p[:-1], u[:-1])
    for line in (p, p[:-1]):
        for cut in (u, u[:-1], u[:-2]):
            k = 0
            while k < min(len(line), len(cut)) and line[-1 - k] == cut[-1 - k]:
                k += 1
            if k > best[0]:
                best = (k, line[:-k], cut[:-k])
    _k, line_dir, unit_dir = best
    return "/" + "/".join(line_dir), "/" + "/".join(unit_dir)


def saves_elsewhere(named: Sequence[tuple[str, str]]) -> list[LogFact]:
    """``named``: (the absolute path a save line names, resolved where the files are when it exists there;
    the unit it wrote) pairs. One fact per pair of directories that differ."""
    by_place: dict[tuple[str, str], list[str]] = {}
    for path, unit in named:
        if not path.startswith("/"):
            continue  # relative to a working directory the log does not name: nothing to compare
        line_dir, unit_dir = _prefixes(path, unit)
        if line_dir != unit_dir:
            by_place.setdefault((line_dir, unit_dir), []).append(path)
    return [
        LogFact(
            SAVES_ELSEWHERE,
            f"{len(paths)} save line(s) name {line_dir} (e.g. {paths[0]}), but the units are in {unit_dir}: "
            "the run was copied or moved, so the units' file times are when they were copied, not when "
            "they were saved",
        )
        for (line_dir, unit_dir), paths in by_place.items()
    ]


def units_without_save_line(units: Sequence[str], copies: dict[str, str], saves_logged: int) -> list[LogFact]:
    """``units`` no save line wrote (relpaths), when the log records ``saves_logged`` > 0 saves;
    ``copies``: unit -> a unit with a save line it holds the same tensors as."""
    if not units or saves_logged == 0:
        return []
    named = ", ".join(
        u + (f" (the same tensors as {copies[u]}: a copy)" if u in copies else "") for u in units[:_SHOWN]
    )
    more = f" and {len(units) - _SHOWN} more" if len(units) > _SHOWN else ""
    return [
        LogFact(
            UNIT_WITHOUT_SAVE_LINE,
            f"{len(units)} checkpoint unit(s) have no save line in the log, which records {saves_logged} "
            f"save(s): {named}{more} — put there by something else (a copy, another job, a save by hand)",
        )
    ]


def saves_without_unit(missing: Sequence[float], unit_steps: Sequence[float]) -> list[LogFact]:
    """The logged saves (steps) no unit on disk is, against the steps of the units that are: reported when
    later than every unit, or between units with no sign of a rotation (see the module doc)."""
    if not unit_steps or not missing:
        return []
    oldest, newest = min(unit_steps), max(unit_steps)
    rotated = any(s < oldest for s in missing)
    later = sorted(s for s in missing if s > newest)
    between = [] if rotated else sorted(s for s in missing if oldest < s < newest)
    out = []
    if later:
        out.append(
            LogFact(
                SAVE_LINE_WITHOUT_UNIT,
                f"the log's save(s) at step {', '.join(step_text(s) for s in later[:_SHOWN])} have no unit "
                f"on disk, later than every unit (the newest at step {step_text(newest)}): the save did not "
                "finish, or the run directory was copied before it",
                steps=tuple(later),
            )
        )
    if between:
        out.append(
            LogFact(
                SAVE_LINE_WITHOUT_UNIT,
                f"the log's save(s) at step {', '.join(step_text(s) for s in between[:_SHOWN])} have no unit "
                "on disk, though units before and after them are there (and no older save is missing, so no "
                "rotation removed them)",
                steps=tuple(between),
            )
        )
    return out
