"""The structured sources, each built here from its format's spec (the real files of each are in the real-log
corpus): W&B's binary record log and run directory, MLflow's file store, Megatron golden values, detectron2
and mmengine JSON lines, Keras/Ultralytics/timm CSVs."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from trainprobe.errors import LogError
from trainprobe.metrics import analyze, read_logs
from trainprobe.metrics.readers.wandb_records import (
    BLOCK,
    HEADER,
    frame_records,
    history_record,
    output_record,
    read_wandb_records,
)
from trainprobe.metrics.reading import pick_reader


def _wandb_dir(tmp_path: Path, rows: int = 40, *, big: bool = False) -> Path:
    run = tmp_path / "wandb" / "offline-run-20261201_000000-abc"
    (run / "files").mkdir(parents=True)
    records = [history_record(s, {"train/loss": 1 / (s + 1), "_timestamp": 1e9 + s}) for s in range(rows)]
    if big:  # one history record longer than a block: FIRST, MIDDLE, LAST pieces
        records.append(history_record(rows, {f"k{i}": float(i) for i in range(4000)}))
    records.append(output_record("Saving checkpoint to ckpt/step-00000020.pt"))
    (run / "run-abc.wandb").write_bytes(frame_records(records))
    (run / "files" / "output.log").write_text("step 20 done\nSaving checkpoint to ckpt/step-00000020.pt\n")
    return run


def test_wandb_record_log_framing_follows_the_spec() -> None:
    data = history_record(3, {"loss": 0.5})
    framed = frame_records([data])
    assert framed[:7] == HEADER == b":W&B" + struct.pack("<HB", 0xBEE1, 0)
    crc, length, kind = struct.unpack_from("<IHB", framed, 7)
    assert (length, kind) == (len(data), 1)
    assert crc == zlib.crc32(data, zlib.crc32(bytes([1])))
    assert framed[14:] == data


def test_wandb_run_dir_reads_the_binary_history_and_its_saves(tmp_path: Path) -> None:
    run_dir = _wandb_dir(tmp_path, big=True)
    assert len(frame_records([history_record(0, {f"k{i}": 1.0 for i in range(4000)})])) > BLOCK
    (run,) = read_logs(tmp_path / "wandb")
    assert run.format == "wandb"
    assert run.name == run_dir.name
    assert run.steps[:40].tolist() == list(range(40))
    assert run.columns["train/loss"][3] == pytest.approx(0.25)
    assert "k3999" in run.columns  # the record cut across blocks came back whole
    assert run.wall is not None
    saves = [e for e in run.events if e.kind == "checkpoint_save"]
    assert [(e.step, e.path) for e in saves] == [(20.0, "ckpt/step-00000020.pt")]


def test_wandb_record_log_torn_tail_and_crc(tmp_path: Path) -> None:
    path = tmp_path / "run-x.wandb"
    good = frame_records([history_record(s, {"loss": 1.0}) for s in range(10)])
    path.write_bytes(good[:-5])  # the last record being written
    assert len(read_wandb_records(path).rows) == 9
    bad = bytearray(good)
    bad[9] ^= 0xFF  # the first record's CRC
    path.write_bytes(bytes(bad))
    with pytest.raises(LogError, match="CRC mismatch"):
        read_logs(path)
    bad = bytearray(good)
    bad[-3] ^= 0xFF  # the last record's data: the rows before it are kept, the stop is said
    path.write_bytes(bytes(bad))
    (run,) = read_logs(path)
    assert len(run) == 9
    assert "stopped early" in run.unread[0].why


def test_wandb_dir_with_a_history_jsonl_or_only_its_console(tmp_path: Path) -> None:
    a = tmp_path / "a" / "run-1" / "files"
    a.mkdir(parents=True)
    (a / "wandb-history.jsonl").write_text(
        "".join(f'{{"_step": {s}, "loss": {1 / (s + 1)}}}\n' for s in range(20))
    )
    (a / "wandb-summary.json").write_text('{"loss": 0.05}')
    (run,) = read_logs(tmp_path / "a")
    assert (run.format, len(run)) == ("wandb", 20)
    b = tmp_path / "b" / "run-2" / "files"
    b.mkdir(parents=True)
    (b / "wandb-summary.json").write_text('{"loss": 0.05}')
    (b / "output.log").write_text("".join(f"step {s} loss {1 / (s + 1):.3f}\n" for s in range(20)))
    (run,) = read_logs(tmp_path / "b")
    assert (run.format, len(run)) == ("wandb", 20)


def test_mlflow_file_store(tmp_path: Path) -> None:
    run_dir = tmp_path / "mlruns" / "1" / "abc123"
    (run_dir / "metrics" / "train").mkdir(parents=True)
    (run_dir / "tags").mkdir()
    (run_dir / "meta.yaml").write_text("run_id: abc123\nrun_name: first\n")
    (run_dir / "tags" / "mlflow.runName").write_text("lr-jump")
    (tmp_path / "mlruns" / "1" / "meta.yaml").write_text("name: exp\n")
    (run_dir / "metrics" / "train" / "loss").write_text(
        "".join(f"{1_700_000_000_000 + 1000 * s} {1 / (s + 1)} {s}\n" for s in range(30))
    )
    (run_dir / "metrics" / "val_loss").write_text(
        "".join(f"{1_700_000_000_000 + 1000 * s} {0.5} {s}\n" for s in range(0, 30, 10)) + "garbage\n"
    )
    (run,) = read_logs(tmp_path / "mlruns")
    assert (run.format, run.name) == ("mlflow", "lr-jump")
    assert run.steps.tolist() == list(range(30))
    assert run.mask("val_loss").sum() == 3
    assert run.wall is not None
    assert run.wall[1] - run.wall[0] == pytest.approx(1.0)
    assert run.skipped_lines == 1


@pytest.mark.parametrize("as_list", [False, True], ids=["values by step", "values as a list"])
def test_megatron_golden_values(tmp_path: Path, as_list: bool) -> None:
    steps = list(range(1, 101, 5))
    loss = [10 - s / 20 for s in steps]
    values: object = loss if as_list else {str(s): v for s, v in zip(steps, loss, strict=True)}
    if not as_list:
        for s in steps[-4:]:
            values[str(s)] = "nan"  # type: ignore[index]
    spec = {"start_step": 1, "end_step": 96, "step_interval": 5, "values": values}
    path = tmp_path / "golden_values_dev.json"
    path.write_text(json.dumps({"lm loss": spec, "num-zeros": {**spec, "values": values}}))
    assert pick_reader(path).name == "megatron-golden"
    report = analyze(path)
    (run,) = report.runs
    assert run.columns["lm loss"][0] == pytest.approx(9.95)
    if as_list:
        assert run.steps[-1] == 96
        assert not [f for f in report.findings if f.kind == "missing_value"]
    else:
        # the "nan" placeholders are steps never recorded: absent, and the run did not reach its end_step
        assert run.steps[-1] == 76
        assert not np.isnan(run.columns["lm loss"]).any()
        (unfinished,) = [f for f in report.findings if f.kind == "missing_value"]
        assert (unfinished.step, unfinished.severity) == (81, "info")


def test_detectron2_metrics_json_with_an_eval_row(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    rows = [
        {"iteration": i, "total_loss": 2 - i / 100, "lr": 0.01, "data_time": 0.1, "eta_seconds": 99 - i}
        for i in range(19, 400, 20)
    ]
    rows.append({"bbox/AP": 38.1, "bbox/AP50": 60.0, "iteration": 399})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = read_logs(path)
    assert run.format == "detectron2"
    assert run.columns["eval/bbox/AP"][run.mask("eval/bbox/AP")].tolist() == [38.1]
    assert run.steps[-1] == 399
    assert run.role("eta_seconds") == "timing"


def test_mmdetection_log_json_and_mmengine_scalars(tmp_path: Path) -> None:
    log = tmp_path / "20260101_000000.log.json"
    lines = [{"env_info": "sys.platform: linux", "config": "model = dict()"}]
    for epoch in (1, 2, 3):
        lines += [
            {"mode": "train", "epoch": epoch, "iter": it, "lr": 0.02, "loss": 1 / (epoch * it), "time": 0.5}
            for it in range(50, 301, 50)
        ]
        lines.append({"mode": "val", "epoch": epoch, "iter": 300, "lr": 0.02, "bbox_mAP": 0.1 * epoch})
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run,) = read_logs(log)
    assert run.format == "mmengine"
    # epoch + iter within the epoch: one axis, (epoch - 1) × 300 + iter
    assert run.steps[run.mask("loss")][[0, 6, -1]].tolist() == [50.0, 350.0, 900.0]
    assert run.columns["eval/bbox_mAP"][run.mask("eval/bbox_mAP")].tolist() == pytest.approx([0.1, 0.2, 0.3])
    scalars = tmp_path / "vis_data" / "scalars.json"
    scalars.parent.mkdir()
    rows = []
    for epoch in range(1, 6):
        rows += [
            {"lr": 0.05, "loss": 1.0, "epoch": epoch, "iter": i, "step": i}
            for i in range(epoch * 50 - 40, epoch * 50 + 1, 10)
        ]
        rows.append(
            {"accuracy": 80.0 + epoch, "data_time": 0.01, "step": epoch}
        )  # the val loop counts epochs
    scalars.write_text("".join(json.dumps(x) + "\n" for x in rows))
    train, val = read_logs(scalars)
    assert train.steps[-1] == 250
    assert val.name.endswith("(eval)")
    assert val.steps.tolist() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("name", "text", "fmt", "step_of_row_2"),
    [
        (
            "training.log",
            "epoch,accuracy,loss,val_accuracy,val_loss\n"
            + "".join(f"{e},0.5,{1 / (e + 1)},0.4,0.6\n" for e in range(5)),
            "keras-csv",
            2,
        ),
        (
            "results.csv",
            "                  epoch,      train/box_loss,    metrics/mAP50(B),                 time\n"
            + "".join(f"{e + 1},{2 - e / 10},{e / 10},{10 * (e + 1)}\n" for e in range(5)),
            "ultralytics",
            3,
        ),
        (
            "summary.csv",
            "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n"
            + "".join(f"{e},{1 / (e + 1)},0.6,70,100.0,0.1\n" for e in range(5)),
            "timm",
            2,
        ),
    ],
)
def test_framework_csvs(tmp_path: Path, name: str, text: str, fmt: str, step_of_row_2: int) -> None:
    path = tmp_path / name
    path.write_text(text)
    (run,) = read_logs(path)
    assert run.format == fmt
    assert run.steps[2] == step_of_row_2  # the epoch column is the step axis
    assert "epoch" not in run.metrics
    if fmt == "ultralytics":
        from trainprobe.metrics.splits import split_of

        assert split_of("metrics/mAP50(B)") == "eval"
        assert run.wall is not None  # time: elapsed seconds that count up
    if fmt == "timm":
        assert run.role("eval_top5") == "counter"  # 100.0 on every epoch (two classes): nothing to watch


def test_yolo_results_txt_reads_as_its_results_csv_names(tmp_path: Path) -> None:
    """YOLOv5/v7 results.txt: no header, 15 whitespace-aligned columns; a wide value touches the one before
    it ("640 0.0001716"), the label count and image size are no series, the epoch its axis."""
    rows = [
        f"{e:>6}/9 {0.4 + e / 10:8.3g}G {0.07 - e / 1000:9.4g} {0.23:9.4g} {0.025:9.4g} {0.33:9.4g}"
        f" {84 - e:9d} {640:9d}{1.7e-4 * (e + 1):10.4g}{0.002:10.4g}{1.7e-6:10.4g}{2.5e-7:10.4g}"
        f"{0.085:10.4g}{0.116:10.4g}{0.0179:10.4g}"
        for e in range(10)
    ]
    path = tmp_path / "results.txt"
    path.write_text("\n".join(rows) + "\n")
    (run,) = read_logs(path)
    assert run.format == "yolo-results"
    assert run.steps.tolist() == list(range(10))
    assert run.columns["train/box_loss"][0] == pytest.approx(0.07)
    assert run.columns["metrics/precision"][-1] == pytest.approx(1.7e-3)
    assert run.columns["val/cls_loss"][0] == pytest.approx(0.0179)
    assert not {"labels", "img_size", "gpu_mem"} & set(run.metrics)
