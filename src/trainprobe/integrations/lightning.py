"""PyTorch Lightning: save through CheckpointWriter every N optimizer steps.

::

    from trainprobe.integrations.lightning import CheckpointWriterCallback

    trainer = L.Trainer(callbacks=[CheckpointWriterCallback("ckpt", every_n_steps=500, keep=3)])

Each checkpoint is ``{"step": global_step, "model": module.state_dict(), "optimizer": [...],
"lr_schedulers": [...], "epoch": ...}`` (optimizer states in ``trainer.optimizers`` order), so ``trainprobe
check`` compares the step counters with ``step``. Only global rank 0 saves (a plain state dict, not a sharded
strategy's checkpoint).
"""

from __future__ import annotations

from typing import Any

from trainprobe.integrations import SaveSchedule, missing
from trainprobe.save import CheckpointWriter

try:
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - depends on what is installed
    try:
        import pytorch_lightning as pl
    except ImportError:
        raise missing("PyTorch Lightning", "lightning") from None


class CheckpointWriterCallback(pl.Callback):  # type: ignore[misc,unused-ignore]
    def __init__(self, dirpath: str, *, every_n_steps: int = 1000, keep: int | None = 3) -> None:
        super().__init__()
        self.dirpath = dirpath
        self.keep = keep
        self.schedule = SaveSchedule(every_n_steps)
        self.writer: CheckpointWriter | None = None

    def _save(self, trainer: Any, module: Any) -> None:
        if not trainer.is_global_zero:
            return
        if self.writer is None:
            self.writer = CheckpointWriter(self.dirpath, keep=self.keep)
        schedulers = [cfg.scheduler.state_dict() for cfg in getattr(trainer, "lr_scheduler_configs", [])]
        self.writer.save(
            trainer.global_step,
            model=module.state_dict(),
            optimizer=[opt.state_dict() for opt in trainer.optimizers],
            lr_schedulers=schedulers,
            epoch=trainer.current_epoch,
        )

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.schedule.due(trainer.global_step):
            self._save(trainer, pl_module)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.schedule.due_at_end(trainer.global_step):
            self._save(trainer, pl_module)
        if self.writer is not None:
            self.writer.close()
