"""Demo code, kept out of the capability packages: ``trainprobe demo`` and the training runs it and the tests
are built from.

- :mod:`trainprobe.demo.run`: ``trainprobe demo`` as plain steps over a :class:`DemoRun` (:func:`run_demo`,
  :func:`story_found`).
- :mod:`trainprobe.demo.story`: the seed's story as a real small CPU training run (:func:`train_story`).
- :mod:`trainprobe.demo.race`: the torn-checkpoint race on its own, and the same loop saved safely
  (:func:`trainprobe.demo.race.train`).

torch is imported only by the training functions.
"""

from __future__ import annotations

from trainprobe.demo.run import STALL_FLOOR_S, DemoRun, run_demo, story_found, triage_remote

__all__ = ["STALL_FLOOR_S", "DemoRun", "run_demo", "story_found", "triage_remote"]
