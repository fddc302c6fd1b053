"""Metric families: what a jump means depends on what the series measures.

A loss that rises by a quarter is news; a gradient norm that rises by a quarter is a Tuesday; a KL or a
reward that moves ×15 over its trailing median is a real event even though its sign, its scale and its
direction say nothing a loss's would. Each family says how the spike detector judges its series:

- ``direction``: +1 a rise is the bad way (losses, gradient norms), -1 a fall (accuracies), 0 both (RL
  diagnostics, anything else);
- ``rel_guard``: the least ``|x − median| / level`` a jump must reach, on top of the z-score; the level is the
  trailing median, or for a series that takes both signs the trailing median of ``|x|`` (a reward around zero
  has no ratio to its median);
- ``signed``: whether a series that takes both signs is judged at all (RL diagnostics: yes, on ``|x|``; a
  signed loss is an RL or GAN objective whose jumps mean nothing);
- ``warn_at``: the relative size from which a spike is a warning rather than ``info`` (losses and accuracies
  have their own scale of severities in :mod:`.spikes`; ``None``: never more than ``info``);
- ``shift_severity``: the severity of a cliff, a level that moved and stayed (a reward that climbs from 0 to
  4.5 and stays is a policy that learned, not a fault).

A name takes its :func:`~trainprobe.metrics.roles.metric_kind`'s family, except: a schedule, timing or
counter stays one; the summary fields of a statistics collector (StyleGAN's ``Loss/G/loss/num``, ``…/std``,
``Timing/…/mean``) are a count (no spikes), a spread (``other``: a jump in the spread of a loss is not a jump
of the loss) and a timing; RL names come before the generic kinds, since ``entropy`` and ``reward`` name a
loss and an accuracy there; a ``cost`` is a loss.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainprobe.metrics.roles import metric_kind


@dataclass(frozen=True)
class Family:
    name: str
    direction: int
    rel_guard: float
    spikes: bool = True
    signed: bool = False
    warn_at: float | None = None
    shift_severity: str = "warning"


LOSS = Family("loss", direction=1, rel_guard=0.25, shift_severity="error")
ACCURACY = Family("accuracy", direction=-1, rel_guard=0.25, shift_severity="error")
# gradient norms are spiky by nature: only doublings are worth a line, and none is more than info
NORM = Family("norm", direction=1, rel_guard=1.0)
# policy-gradient diagnostics move by orders of magnitude in healthy runs; ×5 is a jump, ×10 a warning
RL = Family("rl", direction=0, rel_guard=4.0, signed=True, warn_at=9.0, shift_severity="info")
OTHER = Family("other", direction=0, rel_guard=1.0)
# schedules (their changes are events), timings (the slowdown detector's) and counters: no spikes
SCHEDULE = Family("lr", direction=0, rel_guard=1.0, spikes=False)
TIMING = Family("time", direction=0, rel_guard=1.0, spikes=False)
COUNTER = Family("counter", direction=0, rel_guard=1.0, spikes=False)

#: names that say a reinforcement-learning diagnostic, looked at before the generic kinds
_RL_NAMES = re.compile(
    r"(?i)(?:^|[^a-z])(?:approx_?)?kl(?:_?div\w*|_?coef|_?loss)?(?:[^a-z]|$)|"
    r"(?<!cross)(?<!cross[ _-])entropy|reward|(?:^|[^a-z])returns?(?:[^a-z]|$)|advantage|value[ _-]?loss|"
    r"(?:^|[^a-z])vf_?loss|clip_?frac|policy[ _-]?(?:gradient[ _-]?)?loss|(?:^|[^a-z])pg_?loss|critic|"
    r"(?:^|[^a-z])(?:ep_?)?rew(?:[^a-z]|$)|ep_?rew"
)

#: a loss by another name (PaddlePaddle's and Marian's ``cost``)
_LOSS_NAMES = re.compile(r"(?i)(?:^|[^a-z])cost(?:[^a-z]|$)")
#: the last part of a collector's name: a count of samples, or a spread around the mean
_COUNT_FIELD = re.compile(r"(?i)(?:^|[/_.])(?:num|count)$")
_SPREAD_FIELD = re.compile(r"(?i)(?:^|[/_.])(?:std|stddev|var|variance)$")
_TIMING_NAME = re.compile(r"(?i)(?:^|[/_.])(?:timing|secs?|seconds)(?:$|[/_.])")

_BY_KIND = {
    "loss": LOSS,
    "accuracy": ACCURACY,
    "norm": NORM,
    "lr": SCHEDULE,
    "time": TIMING,
    "counter": COUNTER,
    "other": OTHER,
}


def family_of(name: str) -> Family:
    """The family whose rules judge the series ``name``."""
    kind = metric_kind(name)
    if kind in ("lr", "time", "counter"):
        return _BY_KIND[kind]
    if _COUNT_FIELD.search(name):
        return COUNTER
    if _TIMING_NAME.search(name):
        return TIMING
    if _SPREAD_FIELD.search(name):
        return OTHER
    if _RL_NAMES.search(name):
        return RL
    if kind == "other" and _LOSS_NAMES.search(name):
        return LOSS
    return _BY_KIND.get(kind, OTHER)


def trend_kind(name: str) -> str:
    """The kind the trend detectors judge ``name`` as: its family's, but an RL loss (value loss, policy loss)
    diverges as a loss does, while a reward, a KL or an entropy has no "lower is better"."""
    family = family_of(name)
    if family is RL:
        return "loss" if "loss" in name.lower() else family.name
    return family.name


__all__ = ["ACCURACY", "LOSS", "NORM", "OTHER", "RL", "Family", "family_of", "trend_kind"]
