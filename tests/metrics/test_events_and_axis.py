"""Save events (only from lines that say a save happened, with the path they name), the step axis (two
counters, epochs, progress bars, streams on their own axis), the roles of columns, ``--pattern`` and the
error for a log that gives no metric rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.errors import LogError, UsageError
from trainprobe.metrics import Options, analyze, read_logs
from trainprobe.metrics.events import classify_line, event_from_line, events_from_checkpoint_dir

SAVES = [
    ("Saving checkpoint to ckpt/step-00000100.pt (step 100)", 100.0, "ckpt/step-00000100.pt"),
    ("Saving model checkpoint to out/checkpoint-500", 500.0, "out/checkpoint-500"),
    (
        "Model weights saved in out/checkpoint-500/pytorch_model.bin",
        500.0,
        "out/checkpoint-500/pytorch_model.bin",
    ),
    (
        "Epoch 0, global step 100: 'val_loss' reached 0.5 (best 0.5), saving model to "
        "'/runs/epoch=0-step=100.ckpt' as top 1",
        100.0,
        "/runs/epoch=0-step=100.ckpt",
    ),
    ("  successfully saved checkpoint from iteration     1000 to /ckpt", 1000.0, "/ckpt"),
    (
        "[Rank 0] Saving model checkpoint: /ds/global_step300/mp_rank_00_model_states.pt",
        300.0,
        "/ds/global_step300/mp_rank_00_model_states.pt",
    ),
    ("Unsharded checkpoint saved to /runs/olmo/step500-unsharded", 500.0, "/runs/olmo/step500-unsharded"),
    ("Epoch 00001: val_loss improved from inf to 0.50000, saving model to model.h5", None, "model.h5"),
]
NOT_SAVES = [
    "will save checkpoints every 500 steps",
    "--save-interval 1000",
    "Loading checkpoint from /ckpt/latest-unsharded",
    "save_every : int = 0 # every how many steps to save the checkpoint? 0 for only at the end",
    "    torch.save(state, f'ckpt/step{step}.pt')  # saving the checkpoint",
    "[Torch] Checkpoint global_step100 is about to be saved!",
    "saving checkpoints disabled",
]


@pytest.mark.parametrize(("line", "step", "path"), SAVES, ids=[s[0][:40] for s in SAVES])
def test_save_lines_are_events_with_their_path(line: str, step: float | None, path: str) -> None:
    event = event_from_line(line)
    assert event is not None
    assert event.kind == "checkpoint_save"
    assert event.path == path
    if step is not None:
        assert event.step == step
    assert event.to_json()["path"] == path


@pytest.mark.parametrize("line", NOT_SAVES)
def test_lines_that_only_mention_checkpoints_are_no_events(line: str) -> None:
    assert classify_line(line) is None


def test_a_line_that_reports_a_nonfinite_value() -> None:
    line = "Inf detected in output of decoder.layers.21, shape: torch.Size([1024, 2, 1024])"
    assert classify_line(line) == ("non_finite_reported", None)
    assert classify_line("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536") is None


def test_checkpoint_files_give_saves_with_path_and_time(tmp_path: Path) -> None:
    import numpy as np

    (tmp_path / "global_step200").mkdir()
    (tmp_path / "model.pt").write_bytes(b"x")
    steps = np.arange(0, 400, 10, dtype=float)
    wall = 1_700_000_000 + steps
    import os

    os.utime(tmp_path / "model.pt", (1_700_000_105.0, 1_700_000_105.0))
    events = events_from_checkpoint_dir(tmp_path, steps, wall)
    by_path = {Path(e.path or "").name: e for e in events}
    assert by_path["global_step200"].step == 200
    assert by_path["model.pt"].step == 110  # no step in its name: its modification time on the wall clock
    assert by_path["model.pt"].wall == 1_700_000_105.0


def test_two_counter_axes(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "".join(
            f"Epoch: [{e}][{b:4d}/391]\tTime 0.1 (0.1)\tLoss {2 - e / 10 - b / 10000:.4f} (2.0)\n"
            for e in range(3)
            for b in range(0, 391, 50)
        )
    )
    (run,) = read_logs(path)
    assert run.steps[:3].tolist() == [0.0, 50.0, 100.0]
    assert run.steps[8] == 391.0  # epoch 1, batch 0: one epoch of 391 batches on
    assert "Epoch" not in run.metrics


def test_progress_bar_counter_is_the_step_and_rewrites_keep_their_last_state(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    bars = "".join(f"\r {s // 10}%|##  | {s}/1000 [00:{s % 60:02d}<01:00, 2.0it/s]" for s in range(1, 4))
    text = "".join(
        f"{bars}\r {s // 10}%|##  | {s}/1000 [00:10<01:00, 2.0it/s]"
        f"{{'loss': {2 - s / 1000:.3f}, 'epoch': {s / 1000:.3f}}}\n"
        for s in range(10, 300, 10)
    )
    path.write_text(text)
    (run,) = read_logs(path)
    assert run.steps[:3].tolist() == [10.0, 20.0, 30.0]
    assert run.columns["loss"][0] == pytest.approx(1.99)


def test_config_dumps_and_headers_are_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "{'lr': 0.001, 'batch_size': 32, 'warmup': 100}\n"
        + "".join(f"Epoch {e}/5\n  loss = {1 / (e + 1):.3f}\n  acc = {e / 10:.2f}\n" for e in range(1, 6))
    )
    (run,) = read_logs(path)
    assert "batch_size" not in run.columns
    assert run.steps.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]  # a header and the lines under it: one row
    assert run.columns["acc"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert run.declared_end == 5.0


def test_time_fields_clock_or_duration(tmp_path: Path) -> None:
    cumulative = tmp_path / "a.log"
    cumulative.write_text("".join(f"step {s} loss 1.0 train_time {s * 300}ms\n" for s in range(20)))
    (run,) = read_logs(cumulative)
    assert run.wall is not None
    assert run.wall[2] == pytest.approx(0.6)
    per_iteration = tmp_path / "b.log"
    per_iteration.write_text("".join(f"step {s} loss 1.0 time {250 + (s % 3) * 10}ms\n" for s in range(20)))
    (run,) = read_logs(per_iteration)
    assert run.wall is None  # a duration per iteration is no clock
    assert run.role("time") == "timing"
    megatron = tmp_path / "c.log"
    megatron.write_text(
        "".join(
            f" iteration {s:8d}/ 1000 | elapsed time per iteration (ms): {1800 + s % 7:.1f} | lm loss: 2 |\n"
            for s in range(1, 21)
        )
    )
    (run,) = read_logs(str(megatron))  # a str path works too
    assert run.steps[:3].tolist() == [1.0, 2.0, 3.0]  # "… per iteration" is a rate, not the step
    assert run.role("elapsed time per iteration (ms)") == "timing"


def test_pattern_reads_any_line_shape(tmp_path: Path) -> None:
    path = tmp_path / "odd.log"
    path.write_text("".join(f"<<{s}>> ~ {1 / (s + 1):.4f} @ 0.1\n" for s in range(30)))
    with pytest.raises(LogError, match="no metric rows found"):
        analyze(path)
    report = analyze(path, options=Options(pattern=r"<<(?P<step>\d+)>> ~ (?P<loss>\S+)"))
    (run,) = report.runs
    assert run.steps[-1] == 29
    assert run.columns["loss"][1] == pytest.approx(0.5)
    with pytest.raises(UsageError, match="not a valid regular expression"):
        analyze(path, options=Options(pattern="(?P<step>"))
    with pytest.raises(UsageError, match="names no group"):
        analyze(path, options=Options(pattern=r"\d+"))


def test_a_log_without_metrics_says_which_lines_it_read_and_why(tmp_path: Path) -> None:
    path = tmp_path / "crash.log"
    path.write_text(
        "Loading checkpoint shards: 100%|##########| 2/2 [00:03<00:00, 1.88s/it]\n"
        "Time to load fused_adam op: 0.98 seconds\n"
        "RuntimeError: Expected all tensors to be on the same device\n"
    )
    with pytest.raises(LogError) as got:
        analyze(path)
    text = str(got.value)
    assert "no metric rows found" in text
    assert "line 2: 'Time to load fused_adam op: 0.98 seconds'" in text
    assert "--pattern" in text


@pytest.mark.parametrize("timestamps", [False, True], ids=["no-wall-clock", "wall-clock"])
def test_logs_checkpoints_reads_one_save_from_the_writer_dir(tmp_path: Path, timestamps: bool) -> None:
    """The CheckpointWriter's directory beside a pretrained model: one save, at step 100 (the manifest and
    ``latest`` are its side files, and the 50 in resnet50.pt is no step)."""
    import json
    import os
    import subprocess
    import sys

    start = 1_767_225_600  # the log's first line; the pretrained model was fetched a day before
    stamp = "2026-01-01 00:{:02d}:{:02d} " if timestamps else ""
    log = tmp_path / "train.log"
    log.write_text("".join(f"{stamp.format(s // 60, s % 60)}step {s} loss 1.0\n" for s in range(200)))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in ("step-00000100.pt", "step-00000100.pt.manifest.json", "latest", "resnet50.pt"):
        (ckpt / name).write_bytes(b"x")
        os.utime(ckpt / name, (start + 100.0, start + 100.0))
    os.utime(ckpt / "resnet50.pt", (start - 86400.0, start - 86400.0))
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "logs", str(log), "--checkpoints", str(ckpt), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TZ": "UTC"},
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["has_wall_clock"] is timestamps
    saves = [(e["step"], e["path"]) for e in run["events"] if e["kind"] == "checkpoint_save"]
    assert saves == [(100, str(ckpt / "step-00000100.pt"))]
