"""Demo code, kept out of the capability packages: ``trainprobe demo`` and the training runs it and the tests
are built from.

- :mod:`trainprobe.demo.run`: ``trainprobe demo`` as plain steps over a :class:`DemoRun` (:func:`run_demo`,
  :func:`story_found`: triage found exactly :func:`planted_story`, the story staged at fixed steps).
- :mod:`trainprobe.demo.story`: the seed's story as a real small CPU training run (:func:`train_story`), every
  staged event a function of the step number, never of the clock.
- :mod:`trainprobe.demo.race`: the torn-checkpoint race on its own, and the same loop saved safely
  (:func:`trainprobe.demo.race.train`).

torch is imported only by the training functions.
"""

from __future__ import annotations

from trainprobe.demo.run import (
    STALL_FLOOR_S,
    DemoRun,
    planted_story,
    run_demo,
    story_found,
    told_story,
    triage_remote,
)

__all__ = [
    "STALL_FLOOR_S",
    "DemoRun",
    "planted_story",
    "run_demo",
    "story_found",
    "told_story",
    "triage_remote",
]
