"""Fields whose name stands outside the brackets that hold their value (issue 24): a list of (index, value)
pairs after a key, one per policy or agent (``Avg episode reward: [(0, '-92.843')]``), and keys inside a
group in parentheses after a name (``Policy #0 lag: (min: -1.0, avg: -1.0)``), which alone name no series."""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics import analyze
from trainprobe.metrics.readers.text.fields import read_fields


def test_a_list_of_index_value_pairs_gives_its_first_pairs_value() -> None:
    assert read_fields("Avg episode reward: [(0, '-92.843')]").values == {"Avg episode reward": -92.843}
    assert read_fields("reward: [(0, 1.5), (1, 2.5)] lr: 0.1").values == {"reward": 1.5, "lr": 0.1}
    # arguments after a name with no ``:`` are not its value
    assert read_fields("Conv [(3, 3)]").values == {}


def test_keys_inside_a_group_after_a_name_are_qualified_by_it() -> None:
    got = read_fields("Samples: 48. Policy #0 lag: (min: -1.0, avg: -0.5, max: 2.0)").values
    assert got == {"Samples": 48.0, "lag/min": -1.0, "lag/avg": -0.5, "lag/max": 2.0}
    assert read_fields("Losses: (g: 0.3, d: 0.5) lr: 0.1").values == {
        "Losses/g": 0.3,
        "Losses/d": 0.5,
        "lr": 0.1,
    }
    assert "Fps/sec" in read_fields("Fps is (10 sec: 0.0, 60 sec: 0.0). Total num frames: 0.").values
    # a group with no name before it leaves its keys as they are
    assert read_fields("loss: 0.3 (acc: 0.9)").values == {"loss": 0.3, "acc": 0.9}


def test_a_sample_factory_log_reads_its_reward_and_no_bare_aggregates(tmp_path: Path) -> None:
    lines: list[str] = []
    for i in range(30):
        frames = i * 4096
        lines += [
            f"[2025-07-01 09:01:{i:02d},339][16238] Fps is (10 sec: {100 + i:.1f}, 60 sec: {90 + i:.1f}, "
            f"300 sec: {80 + i:.1f}). Total num frames: {frames}. Throughput: 0: {18 + i / 10:.1f}. "
            f"Samples: {48 * i}. Policy #0 lag: (min: -1.0, avg: {i / 30:.2f}, max: {i / 10:.1f})",
            f"[2025-07-01 09:01:{i:02d},340][16238] Avg episode reward: [(0, '{-100 + i * 3.1:.3f}')]",
        ]
    path = tmp_path / "sf_log.txt"
    path.write_text("\n".join(lines) + "\n")
    report = analyze(path)
    (run,) = report.runs
    assert "Avg episode reward" in run.metrics
    assert not {"min", "avg", "max", "sec"} & set(run.columns)
    assert report.partly_read == []
    steps = run.steps[run.mask("Avg episode reward")]
    assert (steps.min(), steps.max()) == (0, 29 * 4096)
