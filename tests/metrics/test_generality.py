"""Reading logs of shapes nobody tuned for (issue 24): what was not read is said (coverage, "partly read"),
CSV with a preamble before its header, failures as events, saves only from lines that say a checkpoint was
saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.errors import LogError
from trainprobe.metrics import analyze, read_logs
from trainprobe.metrics.events import classify_line, failure_of


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_coverage_counts_numeric_lines_rows_and_the_shapes_not_read(tmp_path: Path) -> None:
    lines = ["starting"] + [f"it {i} loss {1 / (i + 1):.4f}" for i in range(30)]
    lines += [f"  {i}   {1 / (i + 1):.4f}  {i / 300:.4f}  3.2e-4" for i in range(20)]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    cover = run.coverage
    assert cover is not None
    assert (cover.numeric_lines, cover.row_lines, cover.missed_lines) == (50, 30, 20)
    assert cover.unread[0].lines == 20
    assert cover.unread[0].example.startswith("0   1.0000")
    assert cover.unread[0].line_no == 32
    assert cover.partly_read is None  # 20 missed, 30 read: read in the main
    report = analyze(tmp_path / "train.log")
    assert report.exit_code == 0
    assert report.to_json()["runs"][0]["coverage"]["unread_shapes"][0]["lines"] == 20


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
    ],
    ids=["model-summary", "traceback", "config-dump", "constant"],
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
