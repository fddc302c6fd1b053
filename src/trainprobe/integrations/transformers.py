"""Hugging Face Trainer: save through CheckpointWriter every N optimizer steps.

::

    from trainprobe.integrations.transformers import CheckpointWriterCallback

    trainer = Trainer(..., callbacks=[CheckpointWriterCallback("ckpt", every_n_steps=500, keep=3)])

Each checkpoint is ``{"step": state.global_step, "model": model.state_dict(), "optimizer": ...,
"lr_scheduler": ..., "epoch": state.epoch}``. It complements the Trainer's own ``save_steps`` checkpoints; set
``save_strategy="no"`` to rely on this one alone. Only the main process saves.
"""

from __future__ import annotations

from typing import Any

from trainprobe.integrations import SaveSchedule, missing
from trainprobe.save import CheckpointWriter

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - depends on what is installed
    raise missing("transformers", "transformers") from None


class CheckpointWriterCallback(TrainerCallback):  # type: ignore[misc,unused-ignore]
    def __init__(self, dirpath: str, *, every_n_steps: int = 1000, keep: int | None = 3) -> None:
        self.dirpath = dirpath
        self.keep = keep
        self.schedule = SaveSchedule(every_n_steps)
        self.writer: CheckpointWriter | None = None

    def _save(self, state: Any, kwargs: dict[str, Any]) -> None:
        if not state.is_world_process_zero:
            return
        if self.writer is None:
            self.writer = CheckpointWriter(self.dirpath, keep=self.keep)
        self.writer.save(
            state.global_step,
            model=kwargs.get("model"),
            optimizer=kwargs.get("optimizer"),
            lr_scheduler=kwargs.get("lr_scheduler"),
            epoch=state.epoch,
        )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.schedule.due(state.global_step):
            self._save(state, kwargs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.schedule.due_at_end(state.global_step):
            self._save(state, kwargs)
        if self.writer is not None:
            self.writer.close()
