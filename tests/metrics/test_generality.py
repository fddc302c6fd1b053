"""Reading logs of shapes nobody tuned for (issue 24): what was not read is said (coverage, "partly read"),
CSV with a preamble before its header, failures as events, saves only from lines that say a checkpoint was
saved, the step axis by evidence (a counter no name marks, an epoch only when nothing finer counts,
``--step``, writers interleaved in one file, an epoch's length from where its counter starts again)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trainprobe.errors import LogError, UsageError
from trainprobe.metrics import Options, analyze, read_logs
from trainprobe.metrics.events import classify_line, failure_of


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_coverage_counts_numeric_lines_rows_and_the_shapes_not_read(tmp_path: Path) -> None:
    lines = ["starting"] + [f"it {i} loss {1 / (i + 1):.4f}" for i in range(300)]
    lines += [f"  {i}   {1 / (i + 1):.4f}  {i / 300:.4f}  3.2e-4" for i in range(12)]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    cover = run.coverage
    assert cover is not None
    assert (cover.numeric_lines, cover.row_lines, cover.missed_lines) == (312, 300, 12)
    assert cover.unread[0].lines == 12
    assert cover.unread[0].example.startswith("0   1.0000")
    assert cover.unread[0].line_no == 302
    assert cover.partly_read is None  # 12 missed, 300 read: read in the main
    report = analyze(tmp_path / "train.log")
    assert report.exit_code == 0
    assert report.to_json()["runs"][0]["coverage"]["unread_shapes"][0]["lines"] == 12


def test_a_log_whose_metric_lines_were_mostly_not_read_is_partly_read_never_healthy(tmp_path: Path) -> None:
    lines = [f"it {i} loss {1 / (i + 1):.4f}" for i in range(20)]
    lines += [f"  {i}   {1 / (i + 1):.4f}  {i / 300:.4f}  3.2e-4" for i in range(200)]
    report = analyze(_write(tmp_path / "train.log", lines))
    assert [r.name for r, _ in report.partly_read] == ["train"]
    doc = report.to_json()
    assert doc["verdict"] == "not read"
    assert doc["exit_code"] == 2
    assert "200 numeric lines" in doc["partly_read"][0]["why"]
    assert "200 numeric lines" in doc["runs"][0]["coverage"]["partly_read"]


@pytest.mark.parametrize(
    "noise",
    [
        # a model summary: integers only (shapes, parameter counts)
        [f"model.layers.{i}.mlp.weight torch.Size([4096, {11008 + i}]) {i * 4096}" for i in range(300)],
        # a traceback repeated by every rank: line numbers vary, no measurement
        [
            f'  File "/usr/lib/python3.8/site-packages/torch/nn/m{i % 7}.py", line {100 + i}, in f'
            for i in range(300)
        ],
        # a config dump: each line a shape of its own
        [f"config_{chr(97 + i % 26)}{i}: {i / 7:.3f}" for i in range(300)],
        # the same line over and over: nothing varies
        ["GPU 0 memory: 12.5 GB"] * 300,
        # a model summary and a YAML config printed again at each of ten starts: the same few values
        [
            line
            for _ in range(10)
            for c in (32, 64, 128)
            for line in (f"(bn): BatchNorm2d({c}, eps=0.001, momentum=0.03)", "  - 0.999", f"  - {c}")
        ],
    ],
    ids=["model-summary", "traceback", "config-dump", "constant", "summary-at-each-start"],
)
def test_numeric_lines_that_are_no_metrics_do_not_make_a_log_partly_read(
    tmp_path: Path, noise: list[str]
) -> None:
    lines = noise + [f"step {i} loss {1 / (i + 1):.4f}" for i in range(20)]
    report = analyze(_write(tmp_path / "train.log", lines))
    assert report.partly_read == []
    assert report.exit_code == 0


def test_csv_with_comment_lines_before_its_header(tmp_path: Path) -> None:
    rows = [f"{i},{1 / (i + 1)},{i / 100}" for i in range(50)]
    path = _write(
        tmp_path / "metrics.tsv.csv", ["# run: foo", "# date: 2024-01-01", "", "step,loss,acc", *rows]
    )
    (run,) = read_logs(path)
    assert run.format == "csv"
    assert run.metrics == ["loss", "acc"]
    assert (run.steps[0], run.steps[-1]) == (0, 49)


FAILURES = [
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
    ("RuntimeError: CUDA error: out of memory", "out of memory"),
    (
        "[E ProcessGroupNCCL.cpp:828] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1800000)",
        "NCCL timeout",
    ),
    ("/var/spool/slurmd/job123/slurm_script: line 12: 4242 Killed  python train.py", "killed"),
    ("terminate called after throwing an instance of 'c10::Error'", "aborted"),
    ("Fatal Python error: Aborted", "aborted"),
    ("Traceback (most recent call last):", "traceback"),
    ("torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0", "failed"),
]
NOT_FAILURES = [
    "  except torch.cuda.OutOfMemoryError:",
    "--kill-on-bad-exit 1",
    "oom_count: 0",
    "# handle NCCL timeout by retrying",
    "step 10 loss 2.31",
]


@pytest.mark.parametrize(("line", "cause"), FAILURES, ids=[c for _, c in FAILURES])
def test_failure_lines_are_events_with_their_cause(line: str, cause: str) -> None:
    assert failure_of(line) == cause
    assert classify_line(line) == ("failure", None)


@pytest.mark.parametrize("line", NOT_FAILURES)
def test_lines_that_only_mention_a_failure_are_none(line: str) -> None:
    assert failure_of(line) is None


def test_a_traceback_is_one_failure_event_named_by_its_cause(tmp_path: Path) -> None:
    lines = [f"step {i} loss {1 / (i + 1):.4f}" for i in range(20)]
    tb = [
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    report = analyze(_write(tmp_path / "train.log", lines + tb + tb))  # two ranks, one failure
    failures = [e for e in report.events["train"] if e.kind == "failure"]
    assert len(failures) == 1
    assert "out of memory" in failures[0].text
    assert failures[0].step == 19
    assert failures[0].describe() == "the failure (out of memory) at step 19"


def test_a_run_that_failed_before_its_first_metric_says_so(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.log", ["loading model", "RuntimeError: CUDA error: out of memory"])
    with pytest.raises(LogError, match="failed before its first metric"):
        analyze(path)


SAVED_NO_CHECKPOINT = [
    "Saving to: ‘pytorch_model.bin’",
    "  Stored in directory: /root/.cache/pip/wheels/ab/cd/ef",
    "Global data order indices saved to '/data/runs/data-indices/rank0.npy'",
    "wandb: Run data is saved locally in /runs/wandb/run-20240101_000000-abc",
    "model.safetensors saved to /home/u/.cache/huggingface/hub/x",
    "Downloading and saving model to /tmp/m.bin",
    "diff --git a/megatron/checkpointing.py b/megatron/checkpointing.py",
    "going to switch to a much more frequent checkpoint saving",
]


@pytest.mark.parametrize("line", SAVED_NO_CHECKPOINT)
def test_downloads_installs_and_data_saves_are_no_checkpoint_saves(line: str) -> None:
    assert classify_line(line) is None


def test_coverage_survives_the_exact_json_form(tmp_path: Path) -> None:
    lines = [f"it {i} loss {1 / (i + 1):.4f}" for i in range(20)]
    lines += [f"  {i}   {1 / (i + 1):.4f}  {i / 300:.4f}  3.2e-4" for i in range(200)]
    report = analyze(_write(tmp_path / "train.log", lines))
    from trainprobe.metrics import LogReport

    again = LogReport.from_json(json.loads(json.dumps(report.to_json(data=True))))
    assert [why for _, why in again.partly_read] == [why for _, why in report.partly_read]
    assert again.exit_code == 2


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_counter_no_step_name_marks_is_the_axis_before_an_epoch(tmp_path: Path) -> None:
    rows = [
        {"current_steps": 5 * i, "total_steps": 120, "loss": 2 - i / 100, "epoch": round(i / 240, 2)}
        for i in range(1, 25)
    ]
    (run,) = read_logs(_jsonl(tmp_path / "trainer_log.jsonl", rows))
    assert (run.steps[0], run.steps[-1]) == (5, 120)
    assert run.step_key == "current_steps"
    assert "counts up" in run.step_why
    doc = analyze(run).to_json()
    assert doc["runs"][0]["step_axis"]["key"] == "current_steps"


def test_an_epoch_is_the_axis_only_when_nothing_finer_counts(tmp_path: Path) -> None:
    rows = [{"epoch": i, "loss": 2 - i / 100, "total_steps": 120} for i in range(10)]
    (run,) = read_logs(_jsonl(tmp_path / "log.jsonl", rows))
    assert run.step_key == "epoch"
    assert "no finer counter" in run.step_why


def test_step_option_overrides_the_axis_and_names_a_missing_key(tmp_path: Path) -> None:
    rows = [{"current_steps": 5 * i, "loss": 2 - i / 100, "epoch": i / 24} for i in range(1, 25)]
    path = _jsonl(tmp_path / "log.jsonl", rows)
    report = analyze(path, options=Options(step="epoch"))
    assert report.runs[0].step_key == "epoch"
    assert report.runs[0].steps[-1] == 1.0
    with pytest.raises(UsageError, match="--step nope"):
        analyze(path, options=Options(step="nope"))


def test_writers_interleaved_in_one_file_are_no_resumes(tmp_path: Path) -> None:
    lines: list[str] = []
    for s in range(0, 200, 2):  # four ranks, each pair of steps written in a shuffled order
        block = [f"[rank{r}] step {t} loss {2 - t / 200:.4f}" for t in (s, s + 1) for r in range(4)]
        lines += block[::-1] if s % 4 else block
    report = analyze(_write(tmp_path / "train.log", lines))
    run = report.runs[0]
    assert run.writers == 4
    assert "interleaved" in run.step_why
    assert [e for e in report.events["train"] if e.kind == "resume"] == []


def test_a_resume_is_still_a_resume(tmp_path: Path) -> None:
    lines = [f"step {s} loss {2 - s / 200:.4f}" for s in [*range(100), *range(50, 120)]]
    report = analyze(_write(tmp_path / "train.log", lines))
    assert report.runs[0].writers == 1
    assert [e.step for e in report.events["train"] if e.kind == "resume"] == [50]


def test_an_epoch_length_is_read_from_where_the_counter_starts_again(tmp_path: Path) -> None:
    """A counter logged every 100 images that starts each epoch at the remainder of 1452 images."""
    lines, image = [], 100
    while image <= 5000:
        epoch, within = divmod(image, 1452)
        lines.append(f"(epoch: {epoch + 1}, iters: {within}, time: 0.1) G_A: {0.5 + image % 7 / 100:.3f}")
        image += 100
    (run,) = read_logs(_write(tmp_path / "loss_log.txt", lines))
    assert (run.steps[0], run.steps[-1]) == (100, 5000)


@pytest.mark.parametrize(
    "stamp",
    [
        "12-02 10:{m:02d}:{s:02d}",  # no year
        "[12/02 10:{m:02d}:{s:02d} d2.utils.events]:",  # detectron2: in a bracket with its logger
        "[2024-12-02 10:{m:02d}:{s:02d}]",  # a date in brackets
        "10:{m:02d}:{s:02d}",  # time only
        "Dec 02 10:{m:02d}:{s:02d}",
    ],
)
def test_timestamps_of_other_shapes_give_a_wall_clock(tmp_path: Path, stamp: str) -> None:
    lines = [f"{stamp.format(m=i // 6, s=i % 6 * 10)} iter: {i}  loss: {1 / (i + 1):.4f}" for i in range(60)]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert run.wall is not None
    assert run.wall[-1] - run.wall[0] == 590.0
    assert list(run.metrics) == ["loss"]


def test_a_jsonl_file_with_text_lines_appended_reads_both(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "mixed.jsonl", [{"step": i, "loss": 1 / (i + 1)} for i in range(30)])
    with open(path, "a") as fh:
        fh.writelines(f"step {30 + i} | loss {1 / (i + 31):.5f} | lr 3e-4\n" for i in range(300))
    runs = read_logs(path)
    assert [(r.name, r.format, len(r)) for r in runs] == [
        ("mixed", "jsonl", 30),
        ("mixed (text)", "text", 300),
    ]
    assert runs[0].coverage is not None
    assert (runs[0].coverage.numeric_lines, runs[0].coverage.row_lines) == (330, 330)
    assert analyze(path).exit_code == 0


def test_a_jsonl_file_with_numeric_lines_it_cannot_read_is_partly_read(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "mixed.jsonl", [{"step": i, "loss": 1 / (i + 1)} for i in range(30)])
    with open(path, "a") as fh:
        fh.writelines(f"{30 + i} {1 / (i + 31):.5f} 3e-4\n" for i in range(300))
    report = analyze(path)
    assert report.exit_code == 2
    assert "300 numeric lines" in report.partly_read[0][1]


def test_bracket_counters_named_by_the_word_before_them_make_one_axis(tmp_path: Path) -> None:
    lines = [
        f"Epoch [{e}/5], Step [{s}/62], Mel Loss: {1 / (e * 62 + s):.5f}"
        for e in (1, 2)
        for s in range(10, 70, 10)
    ]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert (run.steps[0], run.steps[-1]) == (10, 62 + 60)
    assert run.metrics == ["Mel Loss"]


def test_nested_counters_are_an_epoch_and_a_step_within_it(tmp_path: Path) -> None:
    lines = [f"Train: [{e}/300][{s}/195]\tloss {2 - s / 1000:.4f}" for e in (0, 1) for s in range(0, 195, 10)]
    (run,) = read_logs(_write(tmp_path / "log_rank0.txt", lines))
    assert (run.steps[0], run.steps[-1]) == (0, 195 + 190)


def test_a_counter_finer_than_the_epoch_is_the_axis_whatever_its_name(tmp_path: Path) -> None:
    lines = [
        f"Ep. {1 + u // 2000} : Up. {u} : Sen. {u * 40} : Cost {300 - u / 100:.2f}"
        for u in range(500, 10001, 500)
    ]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert run.step_key == "Up"
    assert (run.steps[0], run.steps[-1]) == (500, 10000)


def test_restarts_are_resumes_not_interleaved_writers(tmp_path: Path) -> None:
    lines, t = [], 0
    for start in range(6):
        t += 3600  # down an hour between starts
        for s in range(10, 60 + start * 10, 10):
            t += 5
            stamp = f"2025-01-30 {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d},000"
            lines.append(f"{stamp} step {s} loss {1 / s:.4f}")
    report = analyze(_write(tmp_path / "train.log", lines))
    assert report.runs[0].writers == 1
    assert len([e for e in report.events["train"] if e.kind == "resume"]) == 5
    assert [f for f in report.findings if f.severity != "info"] == []


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("mem", "counter"),
        ("mem allocated avg", "counter"),
        ("num_classes", "counter"),
        ("dur", "timing"),
        ("data", "timing"),  # the data loader's wait beside ``time`` (CycleGAN)
        ("stats_o/mean", "counter"),  # a normaliser's running statistics of the inputs (baselines' HER)
        ("stats_g/std", "counter"),
        ("obs_rms/var", "counter"),
        ("running_normalizer/mean", "counter"),
        ("data_load", "timing"),
        ("Loss/G/loss", "metric"),
    ],
)
def test_resources_and_settings_are_not_metrics(name: str, role: str) -> None:
    from trainprobe.metrics.roles import role_of

    assert role_of(name, np.array([8974.0, 9012.0, 8990.0, 9100.0])) == role


def test_a_jsonl_value_given_as_its_statistics_is_its_mean(tmp_path: Path) -> None:
    """StyleGAN's stats.jsonl: each value an object {"num", "mean", "std"}; the mean is the value, under the
    value's own name (other nested objects still flatten with /)."""
    rows = [
        {
            "Loss/G/loss": {"num": 32, "mean": 3.0 - i / 100, "std": 0.9},
            "Progress/tick": {"num": 1, "mean": float(i), "std": 0.0},
            "opt": {"lr": 0.002, "betas": {"b1": 0.0}},
        }
        for i in range(20)
    ]
    path = tmp_path / "stats.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = read_logs(path)
    assert run.columns["Loss/G/loss"][:2].tolist() == [3.0, 2.99]
    assert "Loss/G/loss/std" not in run.columns
    assert "opt/lr" in run.columns
    assert "opt/betas/b1" in run.columns


def test_a_rate_after_a_number_is_its_unit_not_prose(tmp_path: Path) -> None:
    """Caffe's solver line: ``Iteration 100 (4.71 iter/s, 21.2s/100 iters), loss = 0.22``."""
    lines = [
        f"I0728 23:55:39.066728  4259 solver.cpp:218] Iteration {i} ({4 + i / 1000:.4f} iter/s, "
        f"21.213s/100 iters), loss = {1 / (1 + i):.5f}"
        for i in range(0, 1000, 100)
    ]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert run.columns["loss"][-1] == pytest.approx(1 / 901, rel=1e-3)
    assert run.steps[-1] == 900


def test_mlperf_event_records_in_a_text_log_are_rows_at_their_counter(tmp_path: Path) -> None:
    """``:::MLLOG {json}``: the value under its key at the metadata's epoch_num, the clock from time_ms; a
    record without a counter (a hyper-parameter, a marker) is read but is no row, and one at another
    counter than the log's series (a summary at ``step``) is left out."""

    def rec(key: str, value: object, **meta: object) -> str:
        doc = {"time_ms": 1621532993063 + 6000 * len(lines), "event_type": "POINT_IN_TIME", "key": key}
        return ":::MLLOG " + json.dumps({**doc, "value": value, "metadata": {"lineno": 9, **meta}})

    lines: list[str] = []
    lines.append(rec("global_batch_size", 55296))
    lines.append(rec("run_start", None))
    for i in range(12):
        lines.append(rec("eval_accuracy", 0.77 + i / 1000, epoch_num=1.05 + i / 20))
    lines.append(rec("tracked_stats", {"throughput": 3.2e7}, step=0.9))
    report = analyze(_write(tmp_path / "result_0.txt", lines))
    (run,) = report.runs
    assert run.metrics == ["eval_accuracy"]
    assert run.steps[0] == pytest.approx(1.05)
    assert run.wall is not None
    assert run.wall[0] == pytest.approx(1621532993.063 + 12)
    assert run.coverage is not None
    assert run.coverage.row_lines == len(lines)
    assert report.partly_read == []


def test_a_config_dump_is_no_records_and_a_remark_after_the_last_field_is_no_prose(tmp_path: Path) -> None:
    """Marian: ``[config] beam-size: 6`` lines before the training lines are settings; a validation line
    ending in ``: new best`` is a row."""
    lines = [f"[2019-03-25 21:15:43] [config] setting-{chr(97 + i)}: {i}" for i in range(20)]
    for k in range(1, 21):
        lines.append(f"[2019-03-25 21:{20 + k}:00] Ep. 1 : Up. {500 * k} : Cost {3.5 - k / 100:.4f}")
        if k % 5 == 0:
            valid = f"[valid] Ep. 1 : Up. {500 * k} : perplexity : 8.9 : new best"
            lines.append(f"[2019-03-25 21:{20 + k}:10] {valid}")
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert not [c for c in run.columns if "setting" in c]
    assert run.step_key == "Up"
    assert int(run.mask("eval/perplexity").sum()) == 4
