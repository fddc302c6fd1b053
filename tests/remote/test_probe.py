"""``probe`` on the local target; GPUs through a stand-in ``nvidia-smi``.

The stand-in is a fake because this machine has no NVIDIA GPU: a shell script that prints what
``nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits``
prints on a two-GPU host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from trainprobe.remote.probe import probe
from waiting import EVENT_DEADLINE_S

#: a far or local Python that stays alive until the test ends it: something to find, not a wait
STAYS_ALIVE = "import time; time.sleep(60)"  # a process kept alive, not a wait


TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


def test_probe_reports_gpus_interpreters_and_training_processes(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'echo "0, NVIDIA H100 80GB HBM3, 71234, 81559, 97"\n'
        'echo "1, NVIDIA H100 80GB HBM3, 3, 81559, 0"\n'
    )
    fake.chmod(0o755)
    trainer = subprocess.Popen(
        # time.sleep here: a process that stays up until the test kills it, not a wait
        [sys.executable, "-c", STAYS_ALIVE, "train.py", "--lr", "3e-4"],
    )
    try:
        report = probe(f"local//env=PATH={fake.parent}:/usr/bin:/bin", cuda=False)
    finally:
        trainer.kill()
        trainer.wait()
    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": "81559"}
    assert report["gpus"] == [
        {"index": "0", **h100, "memory_used_mib": "71234", "utilization_pct": "97"},
        {"index": "1", **h100, "memory_used_mib": "3", "utilization_pct": "0"},
    ]
    assert report["interpreters"]
    assert all(entry.get("version") for entry in report["interpreters"])
    training = [p for p in report["processes"] if p["pid"] == trainer.pid]
    assert training
    assert training[0]["training"] is True
    assert "train.py --lr 3e-4" in training[0]["cmdline"]


def test_cli_probe_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [TRAINPROBE, "probe", "--json", "--no-cuda", "local"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["target"] == "local"
    assert {"interpreters", "gpus", "disks", "load", "cpus", "memory", "processes", "log_dir"} <= set(
        document
    )


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (from /proc's parent links)."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found


def test_probe_leaves_out_trainprobes_own_processes(tmp_path: Path) -> None:
    """Other runs' agents and other probes' short interpreter checks are not "running Python processes".

    The checks live for a moment only; here each is held at start-up by a ``sitecustomize`` that sleeps, so
    its command line is exactly the real one while the probe looks.
    """
    from trainprobe.remote import _discovery as _stage1
    from trainprobe.remote._probe_script import INSPECT
    from trainprobe.remote.api import run

    # time.sleep here: a process that stays up until the test kills it, not a wait
    (tmp_path / "sitecustomize.py").write_text(STAYS_ALIVE + "\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    checks = [
        subprocess.Popen([sys.executable, "-c", INSPECT, "--cuda"], env=env),
        subprocess.Popen([sys.executable, "-c", _stage1.NEED_CHECK, "torch"], env=env),
    ]
    # time.sleep here: a process that stays up until the test kills it, not a wait
    user = subprocess.Popen([sys.executable, "-c", STAYS_ALIVE, "eval.py"], env=env)
    cancel = threading.Event()
    up = threading.Event()  # the other run's script has started: its agent is up
    other = threading.Thread(
        target=run,
        args=("local", "print('up', flush=True); " + STAYS_ALIVE),
        kwargs={"cancel": cancel, "stdout": lambda _: up.set()},
    )
    other.start()
    try:
        assert up.wait(EVENT_DEADLINE_S), "the other run's script did not start"
        report = probe("local", cuda=False)
        started_by_this_test = descendants(os.getpid())
    finally:
        cancel.set()
        for proc in (*checks, user):
            proc.kill()
            proc.wait()
        other.join()
    listed = {p["pid"]: p["cmdline"] for p in report["processes"]}
    assert user.pid in listed  # a user's Python is listed, even one started the same way
    assert not {p.pid for p in checks} & set(listed)
    ours = {
        pid: cmd for pid, cmd in listed.items() if pid in started_by_this_test
    }  # not other sessions' runs
    own_code = (_stage1.OUR_BOOT.decode(), "importlib.util")
    assert not [cmd for cmd in ours.values() if any(code in cmd for code in own_code)]


def test_probe_fleet_gives_each_target_its_report(tmp_path: Path) -> None:
    from trainprobe.remote.probe import probe_fleet

    done: list[str] = []
    targets = ["local", "local//env=PROBE=2", "local//python=/nonexistent/python3"]
    fleet = probe_fleet(targets, cuda=False, parallel=2, on_done=lambda o: done.append(o.target))
    assert sorted(done) == sorted(targets)
    assert [o.status for o in fleet.outcomes] == ["ok", "ok", "no-python"]
    assert fleet.exit_code == 1
    for outcome in fleet.outcomes[:2]:
        report = outcome.result
        assert report["target"] == outcome.target
        assert report["log_dir"] == str(outcome.log_dir)
        assert report["interpreters"]
        assert all(e.get("version") for e in report["interpreters"])
    assert fleet.outcomes[2].result is None
