"""One finding per event: a series that jumps all the time is noisy, not broken a dozen times.

- **a noisy series** (:func:`fold_noise`): when one metric has more than :data:`NOISY_SPIKES` spikes away from
  saves and resumes, or at least :data:`FEW_SPIKES`, one in every :data:`NOISY_EVERY` rows or more often, that
  are the top of a heavy tail (twice as many bursts of rows at least half as far out as the smallest of
  them: a median and MAD take such a series for a quiet one), their typical size (the median) is that
  series' noise. The jumps within
  :data:`OUTLIER` times of it become one ``info`` finding that spans them (what a series does again and
  again is what it does, however large); a jump well beyond its own noise keeps its finding and its
  severity. A jump right after a save or resume is never folded: each is
  its own event (the demo's saves, fifty steps apart, each upset the loss);
- **one event, many metrics** (:func:`one_per_event`): the losses of one model (``loss``, ``loss_cls``,
  ``loss_box``, ``total_loss``) jump together at one step; the finding of the largest effect (losses first)
  names the others, which stay as ``info`` so that each metric still says what it did;
- **row-to-row noise** (:func:`rare_row_jumps`): a few rows after a restart have no baseline, and the short
  rule (a loss ×1.5 from one row to the next) holds only for a series that seldom does that elsewhere.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.detectors.families import family_of
from trainprobe.metrics.findings import SEVERITY_RANK, SPIKE, Finding
from trainprobe.metrics.rolling import trailing_median

NOISY_SPIKES = 5
FEW_SPIKES = 3
NOISY_EVERY = 100
WINDOW = 50
OUTLIER = 3.0
# spikes of two metrics whose starts lie this many steps apart (at most) are one event
SAME_EVENT_STEPS = 1.0


def size_of(f: Finding) -> float:
    """How far a spike's peak went from its baseline, relative to the baseline."""
    if f.value is None or f.baseline is None:
        return 0.0
    return abs(f.value - f.baseline) / max(abs(f.baseline), 1e-12)


def fold_noise(
    findings: list[Finding], metric: str, x: np.ndarray, direction: int, suspect: np.ndarray | None
) -> list[Finding]:
    """``findings`` of one metric (its finite values ``x`` in row order; ``direction`` +1 when a rise is the
    bad way, -1 a fall, 0 both) with the spikes that are its own noise folded into one."""
    free = [f for f in findings if f.kind == SPIKE and not (suspect is not None and suspect[f.row])]
    typical = float(np.median([size_of(f) for f in free])) if free else 0.0
    noise = [f for f in free if size_of(f) < OUTLIER * typical]
    if not _noisy(noise, x, direction):
        return findings
    folded = {id(f) for f in noise}
    return [*(f for f in findings if id(f) not in folded), _folded(noise, metric)]


def _noisy(spikes: list[Finding], x: np.ndarray, direction: int) -> bool:
    if len(spikes) > NOISY_SPIKES:
        return True
    if len(spikes) < FEW_SPIKES or len(spikes) * NOISY_EVERY < x.size:
        return False
    return _bursts(x, direction, 0.5 * min(size_of(f) for f in spikes)) >= 2 * len(spikes)


def _bursts(x: np.ndarray, direction: int, rel: float) -> int:
    """Runs of rows (gaps of up to two rows inside one) more than ``rel`` away from the trailing median, the
    bad way."""
    med = trailing_median(x, WINDOW)
    with np.errstate(invalid="ignore", divide="ignore"):
        dev = (x - med) / np.abs(med)
    dev = dev * direction if direction else np.abs(dev)
    out = np.flatnonzero(np.nan_to_num(dev, nan=0.0, posinf=0.0, neginf=0.0) > rel)
    return int(out.size and 1 + np.count_nonzero(np.diff(out) > 2))


def _folded(noise: list[Finding], metric: str) -> Finding:
    noise = sorted(noise, key=lambda f: f.step)
    largest = max(noise, key=size_of)
    ratios = [f.magnitude for f in noise if f.magnitude is not None and np.isfinite(f.magnitude)]
    span = f" (×{min(ratios):.3g} to ×{max(ratios):.3g} of the level before)" if ratios else ""
    return dataclasses.replace(
        largest,
        severity="info",
        step=noise[0].step,
        end_step=noise[-1].end_step,
        row=noise[0].row,
        message=(
            f"{metric} jumped {len(noise)} times between steps {step_text(noise[0].step)} and "
            f"{step_text(noise[-1].end_step)}{span}: the series' own noise rather than one event; the "
            f"largest: {largest.message}"
        ),
    )


def one_per_event(findings: list[Finding]) -> list[Finding]:
    """The spikes of several metrics of one run that start together, told once: the one of the largest
    effect (a loss before other families) keeps its severity and names the others, which become ``info``."""
    spikes = sorted(
        (f for f in findings if f.kind == SPIKE and f.severity != "info"),
        key=lambda f: (f.run, f.step),
    )
    groups: list[list[Finding]] = []
    for f in spikes:
        last = groups[-1] if groups else None
        if last and last[0].run == f.run and f.step - last[0].step <= SAME_EVENT_STEPS:
            last.append(f)
        else:
            groups.append([f])
    for group in groups:
        if len({f.metric for f in group}) < 2:
            continue
        lead = min(group, key=_precedence)
        others = [f for f in group if f is not lead]
        for f in others:
            f.severity = "info"
            f.message += f" (with {lead.metric}'s jump at step {step_text(lead.step)})"
        names = ", ".join(sorted({f.metric for f in others}))
        lead.message += f"; at the same step {names} jumped too"
    return findings


# a spike this many times its baseline inside a divergence is where the series broke (a critic loss ×5700
# over its median in one epoch), told of its own; smaller ones are part of the trend
ONSET_JUMP = 100.0


def outside_divergence(spikes: list[Finding], diverging: list[Finding]) -> list[Finding]:
    """The spikes of one metric that are events of their own beside its divergences: those outside every
    divergence, and in each the first that jumps ``ONSET_JUMP`` times its baseline or more."""
    out: list[Finding] = []
    told: set[int] = set()
    for f in spikes:
        inside = [i for i, d in enumerate(diverging) if d.step <= f.step <= d.end_step]
        if not inside:
            out.append(f)
        elif (f.magnitude or 0.0) >= ONSET_JUMP and inside[0] not in told:
            told.add(inside[0])
            out.append(f)
    return out


def _precedence(f: Finding) -> tuple[int, int, float]:
    return (SEVERITY_RANK[f.severity], 0 if family_of(f.metric).name == "loss" else 1, -size_of(f))


# a series whose rows jump ×1.5 from one to the next this often (in its stretches) does so as its noise
_ROW_JUMP_NOISE = 0.05
SHORT_JUMP = 1.5
_NOISE_PAIRS = 30


def rare_row_jumps(x: np.ndarray, parts: list[slice]) -> bool:
    """Whether ×1.5 from one row to the next is rare in this series (within its stretches, so a restart's
    drop back to the first level is not counted): then it is a jump in a few pasted lines; a series that
    does it often (the noisy terms of a TTS loss, in the runs of a file of many restarts) has no jump there
    a short stretch could show."""
    pairs = jumps = 0
    for part in parts:
        seg = x[part]
        if seg.size < 2:
            continue
        prev, cur = seg[:-1], seg[1:]
        pairs += int(np.count_nonzero(prev > 0))
        jumps += int(np.count_nonzero((prev > 0) & (cur >= SHORT_JUMP * prev)))
    # a few dozen pairs are no measure of noise (a logbook of pasted snippets: its jumps are the news)
    return pairs < _NOISE_PAIRS or jumps <= _ROW_JUMP_NOISE * pairs


__all__ = [
    "NOISY_SPIKES",
    "OUTLIER",
    "SHORT_JUMP",
    "fold_noise",
    "one_per_event",
    "rare_row_jumps",
    "size_of",
]
