"""Frameworks' own step conventions, applied and said: Lightning's ``global_step`` counts the steps of all its
optimizers (a real two-optimizer Lightning run, written by Lightning in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("lightning")

from trainprobe.checkpoint.check import check_path

# Manual optimization with two optimizers, each stepping once per batch: after 6 batches global_step is 12
# and each optimizer's counters say 6.
TWO_OPTIMIZERS = """
import sys, warnings
warnings.filterwarnings("ignore")
import torch
import lightning as L
from torch.utils.data import DataLoader, TensorDataset

class TwoOptimizers(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.g = torch.nn.Linear(4, 4)
        self.d = torch.nn.Linear(4, 1)

    def training_step(self, batch, i):
        og, od = self.optimizers()
        (x,) = batch
        loss_d = self.d(self.g(x).detach()).pow(2).mean()
        od.zero_grad(); self.manual_backward(loss_d); od.step()
        loss_g = self.d(self.g(x)).pow(2).mean()
        og.zero_grad(); self.manual_backward(loss_g); og.step()

    def configure_optimizers(self):
        return [torch.optim.Adam(self.g.parameters(), 1e-3), torch.optim.Adam(self.d.parameters(), 1e-3)]

torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(24, 4)), batch_size=4)
trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_progress_bar=False,
                    enable_model_summary=False, enable_checkpointing=False, default_root_dir=sys.argv[2])
trainer.fit(TwoOptimizers(), data)
trainer.save_checkpoint(sys.argv[1])
"""


@pytest.fixture(scope="module")
def two_optimizer_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("two-optimizers")
    path = root / "epoch=0-step=12.ckpt"
    subprocess.run(
        [sys.executable, "-c", TWO_OPTIMIZERS, str(path), str(root)],
        check=True,
        capture_output=True,
        cwd=root,
        timeout=240,
    )
    return path


def test_lightning_two_optimizers_count_global_step_together(two_optimizer_ckpt: Path) -> None:
    result = check_path(str(two_optimizer_ckpt))
    assert result.verdict == "consistent", result.reason
    assert result.step == 12
    (counters,) = [e for e in result.evidence if e.check == "step-counters"]
    assert counters.outcome == "pass"
    assert "summed, 6 + 6 = 12: lightning counts its step over all its optimizers" in counters.message
