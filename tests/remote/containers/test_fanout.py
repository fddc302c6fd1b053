"""Fan-out: bounded concurrency, live output prefixed per target, one outcome per target, the fleet's exit
code; and 50 real sshd targets of which one is dead and one too slow."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from remote.faults import assert_nothing_left
from trainprobe.remote.fanout import call_fleet, needs_fleet, run_fleet
from trainprobe.remote.fleet import expand_range, expand_targets
from trainprobe.remote.fleet_result import FleetResult, Outcome
from trainprobe.remote.live_output import LinePrefixer, short_labels
from trainprobe.remote.slurm_jobs import expand_hostlist, parse_squeue


def test_short_labels_keep_what_differs() -> None:
    targets = ["ssh=node01//docker=trainer", "ssh=node02//docker=trainer"]
    assert short_labels(targets) == {targets[0]: "ssh=node01", targets[1]: "ssh=node02"}
    assert short_labels(["ssh=a//venv=/v"]) == {"ssh=a//venv=/v": "ssh=a//venv=/v"}
    mixed = ["ssh=a//docker=x", "ssh=a//docker=y//venv=/v"]
    assert short_labels(mixed) == {mixed[0]: "docker=x", mixed[1]: "docker=y//venv=/v"}


def test_line_prefixer_emits_whole_lines_per_target() -> None:
    lines: list[tuple[str, bytes]] = []
    prefixer = LinePrefixer(["ssh=n1", "ssh=node2"], lambda stream, line: lines.append((stream, line)))
    prefixer.write("ssh=n1", "stdout", b"par")
    prefixer.write("ssh=node2", "stdout", b"other\nhalf")
    prefixer.write("ssh=n1", "stdout", b"tial\nnext\n")
    prefixer.write("ssh=n1", "stderr", b"oops\xff\n")
    prefixer.flush("ssh=node2")
    assert lines == [
        ("stdout", b"ssh=node2 | other\n"),
        ("stdout", b"ssh=n1    | partial\n"),
        ("stdout", b"ssh=n1    | next\n"),
        ("stderr", b"ssh=n1    | oops\xff\n"),
        ("stdout", b"ssh=node2 | half\n"),
    ]


@pytest.mark.parametrize(
    ("nodelist", "nodes"),
    [
        ("vm", ["vm"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[1-2],login1,cpu[9-10]", ["gpu1", "gpu2", "login1", "cpu9", "cpu10"]),
    ],
)
def test_slurm_hostlists(nodelist: str, nodes: list[str]) -> None:
    assert expand_hostlist(nodelist) == nodes


def test_squeue_answers() -> None:
    assert parse_squeue("5", 0, "RUNNING gpu[1-2]\n", "") == (["gpu1", "gpu2"], "")
    assert parse_squeue("5", 0, "", "") == (None, "Slurm job 5 has ended")
    assert parse_squeue("5", 0, "PENDING (null)\n", "") == (None, "Slurm job 5 is pending, not running")
    invalid = "slurm_load_jobs error: Invalid job id specified\n"
    assert parse_squeue("5", 1, "", invalid) == (
        None,
        "there is no Slurm job 5 (ended long ago or never existed)",
    )


def test_fleet_exit_code_rule() -> None:
    ok = Outcome("a", "ok", 0)
    assert FleetResult([ok, ok]).exit_code == 0
    assert FleetResult([ok, Outcome("b", "failed", 3)]).exit_code == 1
    assert FleetResult([ok, Outcome("b", "unreachable", 255)]).exit_code == 1
    assert FleetResult([]).exit_code == 1


def test_needs_fleet() -> None:
    assert not needs_fleet(["ssh=a//docker=t"])
    assert not needs_fleet(["slurm=5@gpu1"])
    assert needs_fleet(["ssh=a", "ssh=b"])
    assert needs_fleet(["ssh=login//slurm=5//venv=/v"])


def test_call_fleet_brings_back_each_value(tmp_path: Path) -> None:
    # expand_range's module (and the rest of trainprobe.remote) is shipped and imported from memory
    fleet = call_fleet(
        ["local//env=I=1", "local//env=I=2"], expand_range, "08-10", timeout=60, log_dir=tmp_path
    )
    assert fleet.exit_code == 0
    assert [o.result for o in fleet.outcomes] == [["08", "09", "10"], ["08", "09", "10"]]


CONCURRENCY_SCRIPT = """\
import os, sys, time
d = sys.argv[1]
me = os.path.join(d, os.environ["I"])
open(me, "w").close()
seen = len(os.listdir(d))
time.sleep(0.3)  # stays a while so that runs at once overlap (the test bounds how many, never demands it)
seen = max(seen, len(os.listdir(d)))
os.unlink(me)
print("target", os.environ["I"], "saw", seen)
if os.environ["I"] == "3":
    sys.exit("giving up")

def main():
    return seen
"""


def test_parallel_bounds_concurrency_and_every_target_reports(tmp_path: Path) -> None:
    running = tmp_path / "running"
    running.mkdir()
    targets = [f"local//env=I={i}" for i in range(6)]
    done: list[str] = []
    out: list[bytes] = []
    lock = threading.Lock()

    def collect(stream: str, line: bytes) -> None:
        with lock:
            out.append(line)

    prefixer = LinePrefixer(targets, collect)
    fleet = run_fleet(
        targets,
        CONCURRENCY_SCRIPT,
        [str(running)],
        parallel=2,
        timeout=60,
        on_output=prefixer.write,
        on_done=lambda o: done.append(o.target),
        log_dir=tmp_path / "fleet",
    )
    assert [o.target for o in fleet.outcomes] == targets
    assert sorted(done) == sorted(targets)
    assert max(o.result or 0 for o in fleet.outcomes) <= 2  # never more than --parallel at once
    statuses = {o.target: o.status for o in fleet.outcomes}
    assert statuses.pop("local//env=I=3") == "failed"
    assert set(statuses.values()) == {"ok"}
    assert fleet.exit_code == 1
    failed = fleet.outcomes[3]
    assert (failed.exit_code, failed.summary) == (1, "exit 1: giving up")
    assert b"env=I=4 | target 4 saw" in b"".join(out)
    saved = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
    assert saved["counts"] == {"total": 6, "ok": 5, "failed": 1}
    assert saved["targets"][3]["exit_code"] == 1
    assert (tmp_path / "fleet" / "003-local-env-I-3" / "stdout").read_bytes().startswith(b"target 3 saw")


def test_cancel_stops_running_targets_and_skips_the_rest(tmp_path: Path) -> None:
    cancel = threading.Event()
    started = threading.Event()
    targets = [f"local//env=I={i}" for i in range(3)]

    def on_output(target: str, stream: str, data: bytes) -> None:
        started.set()

    threading.Thread(target=lambda: started.wait(60) and cancel.set(), daemon=True).start()
    # time.sleep here: a process that stays up until the test kills it, not a wait
    script = "import time\nprint('up', flush=True)\ntime.sleep(120)\n"  # keeps a process alive, not a wait
    fleet = run_fleet(targets, script, parallel=1, on_output=on_output, cancel=cancel, log_dir=tmp_path)
    assert [o.status for o in fleet.outcomes] == ["killed", "killed", "killed"]
    assert fleet.outcomes[0].summary == "interrupted; the far side was killed"
    assert fleet.outcomes[2].summary == "interrupted before it started"
    assert fleet.exit_code == 1


FLEET_SCRIPT = """\
import os, time
address = os.environ["SSH_CONNECTION"].split()[2]
if address == os.environ.get("TP_SLOW", "127.0.1.7"):
    time.sleep(120)  # the slow target: stays until the run's timeout kills it
print("hello from", address, "{braces} $HOME `id` !!")


def main():
    return address
"""


@pytest.mark.ssh
@pytest.mark.slow
def test_fifty_targets_one_dead_one_slow(ssh_setup, sshd) -> None:
    from fixtures.sshd import free_port

    port = free_port("127.0.1.1")
    for n in range(1, 50):  # 127.0.1.50 has no sshd: the dead target
        ssh_setup.start(f"127.0.1.{n}", port)
    user = ssh_setup.users["dash"]
    targets = expand_targets([f"ssh={user}@127.0.1.[1-50]:{port}"])
    assert len(targets) == 50
    slow, dead = targets[6], targets[49]
    done: list[str] = []
    lines: list[bytes] = []
    prefixer = LinePrefixer(targets, lambda stream, line: lines.append(line))

    fleet = run_fleet(
        targets,
        FLEET_SCRIPT,
        timeout=10,
        connect_timeout=5,
        on_output=prefixer.write,
        on_done=lambda o: done.append(o.target),
    )

    assert [o.target for o in fleet.outcomes] == targets
    assert fleet.counts() == {"ok": 48, "timeout": 1, "unreachable": 1}
    assert fleet.exit_code == 1
    by_target = {o.target: o for o in fleet.outcomes}
    assert by_target[slow].status == "timeout"
    assert "timed out after 10 s" in by_target[slow].summary
    assert by_target[dead].status == "unreachable"
    assert "refused" in by_target[dead].summary.lower()
    for n, target in enumerate(targets[:48], start=1):
        if target != slow:
            assert by_target[target].result == f"127.0.1.{n}"
    # the slow target held one slot only: every other target finished before it
    assert done[-1] == slow
    width = len(f"ssh={user}@127.0.1.50:{port}")  # labels are padded to the longest
    label = f"ssh={user}@127.0.1.3:{port}".ljust(width).encode()
    expected = label + b" | hello from 127.0.1.3 {braces} $HOME `id` !!\n"
    assert [line for line in lines if line.startswith(label)] == [expected]
    summary = fleet.to_json()
    assert summary["counts"] == {"total": 50, "ok": 48, "timeout": 1, "unreachable": 1}
    # the slow target's far side was killed, not left sleeping
    assert_nothing_left(user, pattern="python", local=False)
