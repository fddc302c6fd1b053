"""The framework callbacks: schedule logic always; real training only where the framework is installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainprobe.errors import UsageError
from trainprobe.integrations import SaveSchedule


def test_schedule_saves_every_n_steps_once_and_at_the_end() -> None:
    schedule = SaveSchedule(every_n_steps=3)
    due = [step for step in (0, 1, 2, 3, 3, 4, 5, 6, 7) if schedule.due(step)]
    assert due == [3, 6]
    assert schedule.due_at_end(7)
    assert not schedule.due_at_end(7)
    with pytest.raises(UsageError):
        SaveSchedule(every_n_steps=0)


def test_importing_integrations_needs_no_framework() -> None:
    code = (
        "import sys, trainprobe.integrations, trainprobe.save\n"
        "assert not {'torch', 'lightning', 'pytorch_lightning', 'transformers'} & set(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("module", ["lightning", "transformers"])
def test_missing_framework_is_named(module: str) -> None:
    try:
        __import__("lightning" if module == "lightning" else "transformers")
    except ImportError:
        pass
    else:
        pytest.skip(f"{module} is installed")
    with pytest.raises(ImportError, match="pip install"):
        __import__(f"trainprobe.integrations.{module}")


# Lightning 2.6 warns that srun exists (Slurm is installed here for the Slurm tests) and, under torch 2.13,
# calls the deprecated torch.utils._pytree LeafSpec check: neither is about the callback.
@pytest.mark.filterwarnings("ignore:The `srun` command is available on your system:UserWarning")
@pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning")
def test_lightning_callback_saves_consistent_checkpoints(tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    torch = pytest.importorskip("torch")
    from trainprobe.checkpoint.check import check_paths
    from trainprobe.integrations.lightning import CheckpointWriterCallback

    class Module(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: object, _idx: int) -> object:
            x, y = batch  # type: ignore[misc]
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> object:
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    trainer = pl.Trainer(
        max_steps=6,
        callbacks=[CheckpointWriterCallback(str(tmp_path), every_n_steps=2)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
    )
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=8))
    report = check_paths([str(tmp_path)])
    assert [r.verdict for r in report.results] == ["consistent"] * 3
