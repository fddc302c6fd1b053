"""Following a growing file: partial lines, rotation, truncation; online findings appear once; a log's tail
read backwards and its findings."""

from __future__ import annotations

import os
from pathlib import Path

from metrics.synthetic import seed_story_lines
from trainprobe.metrics.follow import FileFollower, OnlineAnalyzer, read_tail, tail_findings


def test_follower_keeps_partial_lines_and_survives_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    follower = FileFollower(log)
    assert follower.poll() == []  # not there yet
    log.write_text("a 1\nb 2\nc 3")
    assert follower.poll() == ["a 1", "b 2"]
    with open(log, "a") as fh:
        fh.write("3\nd 4\n")
    assert follower.poll() == ["c 33", "d 4"]
    with open(log, "a") as fh:
        fh.write("e 5\n")
    os.rename(log, tmp_path / "train.log.1")  # logrotate: the old file got one more line first
    log.write_text("f 6\n")
    assert follower.poll() == ["e 5", "f 6"]
    assert follower.rotations == 1
    log.write_text("")  # truncated in place (copytruncate), then written again
    assert follower.poll() == []
    with open(log, "a") as fh:
        fh.write("g 7\n")
    assert follower.poll() == ["g 7"]
    follower.close()


def test_online_findings_are_reported_once_and_after_their_recovery() -> None:
    lines = list(seed_story_lines(2100))
    online = OnlineAnalyzer("train")
    cut = next(i for i, line in enumerate(lines) if " step 2030 " in line)
    online.feed(lines[:cut])  # the spike row is in, one row after it
    assert [f.kind for f in online.new_findings()] == ["stall"]
    online.feed(lines[cut:])
    fresh = online.new_findings()
    assert [(f.kind, f.step) for f in fresh] == [("spike", 2029.0)]
    assert fresh[0].recovered_after is not None
    assert online.new_findings() == []


def test_the_tail_is_the_last_complete_lines_and_where_they_start(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = [f"step {i} loss {i % 7}" for i in range(200_000)]  # ~4 MB: several blocks back from the end
    log.write_text("\n".join(lines) + "\nstep 200000 lo")  # the last line is still being written
    data = log.read_bytes()
    tail, first, size = read_tail(str(log), 1500)
    assert tail == lines[-1500:]
    assert size == len(data)
    assert data[first:].startswith(b"step 198500 loss ")


def test_a_short_file_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("a\nb\n")
    assert read_tail(str(log), 100) == (["a", "b"], 0, 4)


def test_tail_findings_are_the_findings_of_the_last_lines_after_a_step(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"step: {i}  loss: {9.5 if i == 120 else 2.0 - 0.002 * i:.4f}\n" for i in range(200))
    )
    document = tail_findings(str(log), lines=100)
    assert [(f["kind"], f["step"]) for f in document["findings"]] == [("spike", 120)]
    assert document["tail"]["lines"] == 100
    assert log.read_bytes()[document["tail"]["from_byte"] :].startswith(b"step: 100 ")
    later = tail_findings(str(log), since_step=120)
    assert later["findings"] == []
    assert later["tail"]["findings_before_since_step"] == 1
    assert sum(later["summary"].values()) == 0
