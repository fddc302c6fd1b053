"""`trainprobe watch` as a real process: findings appear while the log grows, across rotation; --exec gets the
finding without a shell; Ctrl-C prints the summary."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from metrics.synthetic import seed_story_lines
from waiting import EVENT_DEADLINE_S, POLL_S


class Watch:
    def __init__(self, *args: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainprobe", "watch", *args, "--interval", "0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, "COLUMNS": "250", "TRAINPROBE_RUNS_DIR": str(cwd / "runs")},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        self.reader = threading.Thread(target=lambda: [self.lines.put(line) for line in stdout], daemon=True)
        self.reader.start()

    def wait_for(self, text: str, timeout: float = EVENT_DEADLINE_S) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed in {timeout} s; got {self.seen}")

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(EVENT_DEADLINE_S)
        self.reader.join(EVENT_DEADLINE_S)
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.proc.stdout.close()
        self.stderr = self.proc.stderr.read()
        self.proc.stderr.close()
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return rc, "".join(self.seen + rest)


def _wait_until_read(watch: Watch, path: Path, timeout: float = EVENT_DEADLINE_S) -> None:
    """Wait for the event "the watcher has read ``path`` to its end": its open file's offset (from /proc)
    is the file's size. Lines appended after it are new growth, on a machine however busy."""
    target, size = str(path.resolve()), path.stat().st_size
    fds = Path(f"/proc/{watch.proc.pid}/fd")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fd in fds.iterdir() if fds.exists() else ():
            try:
                if os.readlink(fd) == target:
                    info = (fds.parent / "fdinfo" / fd.name).read_text()
                    if int(info.split("pos:")[1].split()[0]) >= size:
                        return
            except (OSError, IndexError, ValueError):
                continue
        time.sleep(POLL_S)  # polling interval
    raise AssertionError(f"the watcher did not read {path} to its end within {timeout:g} s")


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as fh:
        fh.write("\n".join(lines) + "\n")
        fh.flush()


def test_findings_appear_as_the_log_grows_across_rotation(tmp_path: Path) -> None:
    lines = list(seed_story_lines(4400))
    at = next(i for i, line in enumerate(lines) if " step 2100 " in line)
    log = tmp_path / "train.log"
    _append(log, lines[:1500])
    watch = Watch(str(log), cwd=tmp_path)
    try:
        _wait_until_read(watch, log)
        _append(log, lines[1500:at])
        found = watch.wait_for("loss step 2029")
        assert "checkpoint save at step 2000" in found
        os.rename(log, tmp_path / "train.log.1")  # rotation: the run keeps logging into a new file
        _append(log, lines[at:])
        watch.wait_for("acc step 4229")
    finally:
        rc, out = watch.interrupt()
    assert rc == 1  # errors were found (--fail-on error)
    assert "summary" in out
    assert "3 error, 2 warning" in out
    assert out.count("loss step 2029") == 1  # printed once, not again after the rotation


def test_exec_gets_the_finding_in_env_and_stdin_without_a_shell(tmp_path: Path) -> None:
    record = tmp_path / "record.py"
    record.write_text(
        "import json, os, sys\n"
        "doc = json.load(sys.stdin)\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('TRAINPROBE_FINDING_')}\n"
        "open(sys.argv[1], 'a').write(json.dumps({'env': env, 'stdin': doc}) + '\\n')\n"
    )
    out = tmp_path / "calls.jsonl"
    log = tmp_path / "t.log"
    lines = [f"step {s} loss {1.0 + (6.0 if s == 120 else 0.0):.2f}" for s in range(100)]
    lines.insert(95, "operator note: $(touch PWNED) `touch PWNED2`; rm -rf nothing")
    _append(log, lines)
    watch = Watch(
        str(log), "--event", "operator note", "--exec", f"{sys.executable} {record} {out}", cwd=tmp_path
    )
    try:
        _wait_until_read(watch, log)
        _append(log, [f"step {s} loss {1.0 + (6.0 if s == 120 else 0.0):.2f}" for s in range(100, 140)])
        watch.wait_for("loss step 120")
        deadline = time.monotonic() + EVENT_DEADLINE_S
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # polling interval: waiting for the --exec command's file
    finally:
        watch.interrupt()
    (call,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert call["env"]["TRAINPROBE_FINDING_KIND"] == "spike"
    assert call["env"]["TRAINPROBE_FINDING_STEP"] == "120"
    assert "$(touch PWNED)" in call["env"]["TRAINPROBE_FINDING_MESSAGE"]
    assert call["stdin"]["step"] == 120
    assert call["stdin"]["event"]["kind"] == "custom"
    assert not (tmp_path / "PWNED").exists()
    assert not (tmp_path / "PWNED2").exists()


def test_watch_on_a_target_follows_the_file_there(tmp_path: Path) -> None:
    """Through the remote engine (the ``local`` target runs the same agent and framing as ssh)."""
    lines = list(seed_story_lines(2100))
    log = tmp_path / "train.log"
    _append(log, lines[:1000])
    watch = Watch(str(log), "--on", "local", cwd=tmp_path)
    try:
        _append(log, lines[1000:])
        found = watch.wait_for("loss step 2029")
        assert "checkpoint save at step 2000" in found
    finally:
        rc, out = watch.interrupt()
    assert rc == 1
    assert "summary" in out
    assert "watching" in watch.stderr
    assert "on local" in watch.stderr


def test_watch_on_takes_one_target_named_once(tmp_path: Path, cli: Any) -> None:
    log = tmp_path / "train.log"
    _append(log, ["step 1 loss 1.0"])
    fleet = cli("watch", str(log), "--on", "ssh=node[01-02]")
    assert fleet.exit_code == 2
    assert "watch follows one log on one target; ssh=node[01-02] names 2 targets" in fleet.stderr
    twice = cli("watch", "local", str(log), "--on", "local")
    assert twice.exit_code == 2
    assert "two targets" in twice.stderr
    config = tmp_path / "targets.toml"
    config.write_text('[groups]\ntrainers = ["ssh=a", "ssh=b"]\n')
    group = cli("watch", str(log), "--on", "trainers", "--config", str(config))
    assert group.exit_code == 2
    assert "names 2 targets" in group.stderr


def test_json_lines_and_a_bad_target(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    _append(log, [f"step {s} loss {1.0 + (6.0 if s == 120 else 0.0):.2f}" for s in range(140)])
    watch = Watch(str(log), "--json", cwd=tmp_path)
    try:
        first = json.loads(watch.wait_for('"type": "finding"'))
    finally:
        rc, out = watch.interrupt()
    assert (first["kind"], first["step"], first["severity"]) == ("spike", 120, "error")
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["type"] == "summary"
    assert summary["schema_version"] == 3
    assert rc == 1
    bad = subprocess.run(
        [sys.executable, "-m", "trainprobe", "watch", "nosuchkind=x", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2, bad.stderr


def test_unreachable_target_fails_at_once(tmp_path: Path) -> None:
    from fixtures.sshd import free_port

    target = f"ssh=nobody@127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "watch", target, "/tmp/train.log"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TRAINPROBE_RUNS_DIR": str(tmp_path / "runs")},
    )
    assert proc.returncode == 1
    assert "unreachable" in " ".join(proc.stderr.split())
