"""What ties a finding to the run around it: the events a run's rows imply (resumes, epochs, LR changes,
evals, saves), the event nearest before each finding, and the next step to suggest from both."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.events import (
    CHECKPOINT_SAVE,
    CUSTOM,
    EPOCH,
    EVAL,
    LR_CHANGE,
    NONFINITE_LINE,
    RESUME,
    Event,
    events_from_checkpoint_dir,
)
from trainprobe.metrics.findings import (
    CLIFF,
    DIVERGENCE,
    EARLY_EXPLOSION,
    MISSING,
    NON_FINITE,
    OVERFITTING,
    SPIKE,
    STALL,
    THROUGHPUT,
    Finding,
)
from trainprobe.metrics.roles import metric_kind
from trainprobe.metrics.table import RunLog


def derive_events(run: RunLog, checkpoints: Path | None = None) -> list[Event]:
    """The events of ``run``: its readers' (saves, custom matches), the step going back (a resume), epoch
    boundaries, step-schedule LR changes, eval rows, and the saves a checkpoint directory's files date."""
    events = list(run.events)
    steps = run.steps
    if len(run) > 1 and run.writers == 1:  # several writers' steps interleave: going back is no resume
        back = np.flatnonzero(np.diff(steps) < 0) + 1
        for i in back[:1000]:
            events.append(
                Event(
                    RESUME,
                    float(steps[i]),
                    int(i),
                    text=f"step went back from {step_text(steps[i - 1])} to {step_text(steps[i])}",
                )
            )
    for name, col in run.columns.items():
        kind = metric_kind(name)
        rows = np.flatnonzero(run.mask(name) & np.isfinite(col))
        if rows.size < 3:
            continue
        if name.lower() == "epoch":
            ep = np.floor(col[rows])
            for i in np.flatnonzero(np.diff(ep) > 0)[:1000] + 1:
                events.append(Event(EPOCH, float(steps[rows[i]]), int(rows[i]), text=f"epoch {int(ep[i])}"))
        elif kind == "lr":
            x = col[rows]
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.abs(np.diff(x)) / np.maximum(np.abs(x[:-1]), 1e-30)
            changes = np.flatnonzero(rel > 0.01) + 1
            # Schedules that move every step (warmup, cosine) are not events; step schedules are. (A few
            # rows of a warmup, each one up, are a schedule too.)
            if 0 < changes.size <= max(3, 0.05 * rows.size) and 2 * changes.size <= rows.size - 1:
                for i in changes:
                    events.append(
                        Event(
                            LR_CHANGE,
                            float(steps[rows[i]]),
                            int(rows[i]),
                            text=f"{name} {x[i - 1]:.3g} → {x[i]:.3g}",
                        )
                    )
    eval_cols = [n for n in run.columns if re.match(r"(?i)(val|eval|test|tel$)", n)]
    if eval_cols:
        have = np.zeros(len(run), dtype=bool)
        for n in eval_cols:
            have |= run.mask(n)
        others = [n for n in run.columns if n not in eval_cols]
        train = np.zeros(len(run), dtype=bool)
        for n in others:
            if run.present.get(n) is not None:
                train |= run.mask(n)
        for i in np.flatnonzero(have & ~train)[:5000]:
            events.append(Event(EVAL, float(steps[i]), int(i), text="eval"))
    if checkpoints is not None:
        events.extend(events_from_checkpoint_dir(checkpoints, steps, run.wall))
    events.sort(key=lambda e: (e.row, e.step))
    return events


_PRIMARY = (CHECKPOINT_SAVE, RESUME, CUSTOM, LR_CHANGE)


# A save that holds logging up for less than this many usual gaps is an ordinary save (a 1B model takes
# tens of seconds to write), worth knowing but no warning; the seed's blocking save took 340 of them.
ORDINARY_SAVE_GAPS = 20.0


def attach_stalls(events: list[Event], stalls: list[Finding]) -> None:
    for stall in stalls:
        for e in events:
            if e.kind in (CHECKPOINT_SAVE, CUSTOM, EVAL) and (
                stall.row - 2 <= e.row <= stall.row or stall.step <= e.step <= stall.end_step
            ):
                e.stall_s = max(e.stall_s or 0.0, float(stall.value or 0.0))
                if stall.event is None:
                    stall.event, stall.event_distance = e, 0.0
                    stall.message += f", during {e.describe().split(', which')[0]}"
        event = stall.event
        if (
            event is not None
            and event.kind in (CHECKPOINT_SAVE, EVAL)
            and (stall.magnitude or 0.0) < ORDINARY_SAVE_GAPS
        ):
            stall.severity = "info"
            what = "save" if event.kind == CHECKPOINT_SAVE else "eval"
            stall.message += f" (an ordinary {what}: under {ORDINARY_SAVE_GAPS:.0f}× the usual gap)"


def nearest_event(events: list[Event], finding: Finding, near: float) -> tuple[Event | None, float | None]:
    before = [
        e
        for e in events
        if e.row <= finding.row
        and e.step <= finding.step
        and e.kind != EVAL
        and finding.step - e.step <= near
    ]
    primary = [e for e in before if e.kind in _PRIMARY]
    pool = primary or before
    if not pool:
        return None, None
    best = max(pool, key=lambda e: (e.row, e.step))
    return best, finding.step - best.step


def suggest(f: Finding, near: float) -> None:
    e = f.event
    if e is not None and e.kind == NONFINITE_LINE and e.text[:60] in f.message:
        e = None  # the finding is that line's own report: "at the non-finite value the log reports" again
    if f.kind in (SPIKE, CLIFF, DIVERGENCE, NON_FINITE, MISSING) and e is not None:
        gap = f.event_distance or 0
        f.message += (
            f", at {e.describe()}"
            if gap == 0
            else f", {step_text(gap)} step{'s' * (gap != 1)} after {e.describe()}"
        )
    if f.kind == STALL:
        f.suggestion = (
            "look at what the job did then: checkpoint I/O, an eval, a slow or preempted node"
            if e is None
            else f"time the eval at step {step_text(e.step)}: a long eval blocks training and logging"
            if e.kind == EVAL
            else f"time the save at step {step_text(e.step)}: slow storage or a blocking save"
        )
        return
    if f.kind == THROUGHPUT:
        f.suggestion = "compare node health, data-loader workers and I/O before and after this step"
        return
    if e is not None and e.kind == CHECKPOINT_SAVE:
        f.suggestion = (
            f"scan and check the checkpoint saved at step {step_text(e.step)} "
            f"(trainprobe scan / trainprobe check); a save that blocks or mutates training state is suspect"
        )
    elif e is not None and e.kind == RESUME:
        f.suggestion = (
            f"compare the state resumed at step {step_text(e.step)} with the checkpoint it came from "
            "(trainprobe diff): optimizer state, LR schedule, data position"
        )
    elif e is not None and e.kind == LR_CHANGE:
        f.suggestion = (
            f"the learning rate changed at step {step_text(e.step)} ({e.text}); try a smaller change or "
            "warmup"
        )
    elif f.kind == NON_FINITE and metric_kind(f.metric) == "time":
        f.suggestion = (
            "a timing field, not the model: usually an average over zero steps at the start; harmless"
        )
    elif f.kind == NON_FINITE:
        f.suggestion = (
            f"scan the first checkpoint saved after step {step_text(f.step)} for NaN/Inf (trainprobe scan)"
        )
    elif f.kind == MISSING and not f.suggestion:  # a detector that knows the cause said it (lost rows)
        f.suggestion = (
            "count how often this happens; many skipped steps point to fp16 overflow or bad batches"
        )
    elif f.kind == CLIFF:
        f.message += f"; no checkpoint save or stall within {round(near)} steps before it"
        f.suggestion = (
            f"no save or stall explains it: inspect the data and the eval pipeline around step "
            f"{step_text(f.step)}, and diff the checkpoints before and after it (trainprobe diff)"
        )
    elif f.kind == DIVERGENCE:
        f.suggestion = "lower the learning rate or restart from the last checkpoint before the rise"
    elif f.kind == OVERFITTING:
        f.suggestion = (
            f"keep the checkpoint from around step {step_text(f.step)} (the best eval), and regularise or "
            "stop earlier"
        )
    elif f.kind == EARLY_EXPLOSION:
        f.suggestion = (
            "lower the initial learning rate or add warmup; clip gradients; check the input scaling"
        )
    elif f.kind == SPIKE:
        f.suggestion = (
            f"inspect the batches around step {step_text(f.step)}; if the same steps spike in another run "
            "with the same data order, the data is the cause"
        )
