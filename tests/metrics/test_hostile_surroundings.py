"""``logs``/``watch`` in hostile surroundings (issue 19): the filesystem around the logs, logs at size, data
that is not text. Each case runs the CLI in a child process and asserts its exit code, its time and its
peak RSS (``wait4`` of a forked child, so the test process's own memory is not charged)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from waiting import EVENT_DEADLINE_S

ROOT = Path(__file__).resolve().parents[2]
REAL_WANDB = ROOT / "tests/data/real-logs/wandb__offline-run-mlp/wandb"

_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


@dataclass
class Ran:
    code: int
    out: str
    seconds: float  # CPU time (user + system): the command's own cost, which a busy machine does not stretch
    rss_mb: float


def trainprobe(
    *args: str | Path, timeout: float = EVENT_DEADLINE_S, user: int | None = None, cwd: Path | None = None
) -> Ran:
    with tempfile.NamedTemporaryFile("r", suffix=".rss", delete=False) as rss:
        pass
    os.chmod(rss.name, 0o666)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    preexec = None
    if user is not None:
        env["HOME"] = str(cwd or tempfile.gettempdir())

        def preexec() -> None:
            os.setgid(user)
            os.setuid(user)

    argv = [sys.executable, "-c", _LAUNCHER, rss.name, sys.executable, "-m", "trainprobe", *map(str, args)]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=preexec, cwd=cwd
    )
    kb, seconds = (float(x) for x in [*Path(rss.name).read_text().split(), "0", "0"][:2])
    os.unlink(rss.name)
    return Ran(proc.returncode, proc.stdout + proc.stderr, seconds, kb / 1024)


def ok(ran: Ran, code: int | tuple[int, ...], *, seconds: float = 10, rss_mb: float = 400) -> None:
    codes = (code,) if isinstance(code, int) else code
    assert ran.code in codes, ran.out
    assert "internal error" not in ran.out, ran.out
    assert "Traceback" not in ran.out, ran.out
    assert ran.seconds < seconds, f"{ran.seconds:.1f} s of CPU: {ran.out}"
    assert ran.rss_mb < rss_mb, f"{ran.rss_mb:.0f} MB: {ran.out}"


def nan_log(path: Path) -> Path:
    path.write_text("".join(f"step {i} loss {'nan' if i == 30 else 1.0 + i / 100}\n" for i in range(60)))
    return path


def jsonl(path: Path, key: str = "loss", n: int = 60) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"step": i, key: 1.0 if i != 40 else 1e6}) + "\n")
    return path


# -- data that is not text ----------------------------------------------------------------------------------
def test_a_lone_surrogate_in_a_jsonl_key_reads_and_renders(tmp_path: Path) -> None:
    log = jsonl(tmp_path / "s.jsonl", "lr\ud800")
    ok(trainprobe("logs", log), (0, 1))
    ok(trainprobe("logs", "--json", log), (0, 1))
    ran = trainprobe("logs", log, "--html", tmp_path / "r.html")
    ok(ran, (0, 1))
    assert "ud800" in (tmp_path / "r.html").read_text()


def test_a_step_of_1e999_renders_html(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("step 1 loss 1.0\nstep 2 loss 1.0\nstep 1e999 loss 2.0\nstep 3 loss 1.0\n")
    ok(trainprobe("logs", log, "--html", tmp_path / "r.html"), (0, 1))
    assert (tmp_path / "r.html").stat().st_size > 0


def test_watch_exec_gets_a_nul_and_a_surrogate_escaped(tmp_path: Path) -> None:
    log = tmp_path / "w.jsonl"
    with open(log, "w") as fh:
        for i in range(60):
            fh.write(json.dumps({"step": i, "lo\u0000ss": 1.0 if i != 40 else 1e6, "x\ud800": 1.0}) + "\n")
    argv = [sys.executable, "-m", "trainprobe", "watch", "--interval", "0.2"]
    argv += ["--exec", 'sh -c "echo GOT $TRAINPROBE_FINDING_METRIC"', str(log)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while time.monotonic() < deadline:  # wait for the event: the --exec command's line (or the end)
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("GOT"):
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=EVENT_DEADLINE_S)
    out = "".join(seen) + rest
    assert "GOT lo\\x00ss" in out, out
    assert "internal error" not in out, out
    assert "Traceback" not in out, out


# -- the filesystem around the logs -------------------------------------------------------------------------
def test_what_a_tree_cannot_open_is_said_and_the_rest_is_read(tmp_path: Path) -> None:
    nan_log(tmp_path / "a.log")
    (tmp_path / "dangling.log").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1.log").symlink_to(tmp_path / "loop2.log")
    (tmp_path / "loop2.log").symlink_to(tmp_path / "loop1.log")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "self").symlink_to(tmp_path / "d")  # a directory link loop: not walked into
    os.mkfifo(tmp_path / "fifo.log")
    ran = trainprobe("logs", tmp_path)
    ok(ran, 2)
    assert "loss is NaN at step 30" in ran.out
    for name, why in [
        ("dangling.log", "dangling"),
        ("loop1.log", "loop"),
        ("fifo.log", "not a regular file"),
    ]:
        assert f"not read {tmp_path / name}" in ran.out, ran.out
        assert why in ran.out, ran.out
    assert "healthy" not in ran.out
    document = json.loads(trainprobe("logs", "--json", tmp_path).out)
    assert {n["path"] for n in document["not_read"]} >= {str(tmp_path / "fifo.log")}


def test_a_fifo_given_as_the_path_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.log")
    ran = trainprobe("logs", tmp_path / "f.log", timeout=EVENT_DEADLINE_S)  # a blocking open never ends
    ok(ran, 2)
    assert "not a regular file" in ran.out
    ok(trainprobe("watch", tmp_path / "f.log", timeout=EVENT_DEADLINE_S), 2)


def _deep(root: Path, length: int) -> list[str]:
    """Directories under ``root`` making a path over ``length`` characters (made through dir fds: the
    whole path is too long for mkdir)."""
    parts: list[str] = []
    fd = os.open(root, os.O_RDONLY)
    try:
        while len(str(root)) + sum(len(p) + 1 for p in parts) < length:
            name = "d" * 200
            os.mkdir(name, dir_fd=fd)
            new = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
            parts.append(name)
        out = os.open("nan.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"".join(f"step {i} loss {'nan' if i == 30 else 1.0}\n".encode() for i in range(60)))
        os.close(out)
    finally:
        os.close(fd)
    return parts


def test_a_path_over_path_max_is_not_read_not_healthy(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    nan_log(tree / "ok.log")
    parts = _deep(tree, 4500)
    ran = trainprobe("logs", tree)
    ok(ran, 2)
    assert "not read" in ran.out, ran.out
    assert "longer than the system takes" in ran.out, ran.out
    assert "healthy" not in ran.out
    shutil.rmtree(tree / parts[0], ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a child as nobody: needs root")
def test_an_unreadable_directory_is_not_read_for_an_unprivileged_user() -> None:
    import pwd

    nobody = pwd.getpwnam("nobody").pw_uid
    top = Path(tempfile.mkdtemp(prefix="tp-unreadable-"))
    try:
        os.chmod(top, 0o755)
        nan_log(top / "a.log")
        (top / "secret").mkdir()
        nan_log(top / "secret" / "b.log")
        os.chmod(top / "secret", 0)
        try:
            ran = trainprobe("logs", top, user=nobody, cwd=top)
        except PermissionError as exc:
            pytest.skip(f"nobody cannot run this interpreter: {exc}")
        ok(ran, 2)
        assert f"not read {top / 'secret'}: permission denied" in ran.out, ran.out
    finally:
        os.chmod(top / "secret", stat.S_IRWXU)
        shutil.rmtree(top)


def test_a_wandb_run_directory_claims_only_what_it_reads(tmp_path: Path) -> None:
    shutil.copytree(REAL_WANDB, tmp_path / "wandb", symlinks=True)
    run_dir = next((tmp_path / "wandb").iterdir())
    (run_dir / "files").mkdir(exist_ok=True)
    nan_log(run_dir / "files" / "train.log")
    nan_log(run_dir / "beside.log")
    jsonl(tmp_path / "other.jsonl")
    for where in (tmp_path, run_dir):
        ran = trainprobe("logs", "--json", where)
        ok(ran, 1)
        names = {r["name"] for r in json.loads(ran.out)["runs"]}
        assert {run_dir.name, "train", "beside"} <= names, names
        assert not names & {"debug", "debug-internal", "debug-core", "requirements", "output"}, names


def test_an_mlflow_run_claims_only_its_own_folders(tmp_path: Path) -> None:
    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_name: r1\n")
    (run / "metrics" / "loss").write_text("".join(f"{1000 + i} {1.0 + i / 100} {i}\n" for i in range(50)))
    (run / "artifacts").mkdir()
    nan_log(run / "artifacts" / "train.log")
    ran = trainprobe("logs", "--json", tmp_path)
    ok(ran, 1)
    names = {r["name"] for r in json.loads(ran.out)["runs"]}
    assert {"r1", "train"} <= names, names


# -- logs at size -------------------------------------------------------------------------------------------
def test_a_terabyte_hole_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "hole.log"
    with open(log, "w") as fh:
        fh.write("".join(f"step {i} loss 1.0\n" for i in range(50)))
    os.truncate(log, log.stat().st_size + (1 << 40))
    with open(log, "a") as fh:
        fh.write("\n" + "".join(f"step {i} loss 1.0\n" for i in range(50, 100)))
    ran = trainprobe("logs", "--json", log)
    ok(ran, 0)
    assert json.loads(ran.out)["runs"][0]["rows"] == 100


def test_a_huge_csv_cell_is_not_held(tmp_path: Path) -> None:
    log = tmp_path / "cell.csv"
    log.write_text("step,loss\n1,1.0\n2,1.0\n3,")
    os.truncate(log, 400 << 20)
    with open(log, "a") as fh:
        fh.write("\n4,1.0\n5,1.0\n6,1.0\n")
    ran = trainprobe("logs", "--json", log)
    ok(ran, 0, rss_mb=300)
    assert json.loads(ran.out)["runs"][0]["rows"] == 5


def test_thousands_of_keys_logged_once_are_refused_not_allocated(tmp_path: Path) -> None:
    log = tmp_path / "sparse.jsonl"
    with open(log, "w") as fh:
        for i in range(100_000):
            row = {"step": i, "loss": 1.0}
            if i % 33 == 0 and i // 33 < 3000:
                row[f"k{i // 33}"] = 1.0
            fh.write(json.dumps(row) + "\n")
    ran = trainprobe("logs", log)
    ok(ran, 2, rss_mb=600)
    assert "too sparse" in ran.out


def test_an_mlflow_run_of_1500_metrics_is_not_a_dense_block(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_name: wide\n")
    for k in range(1500):
        lines = "".join(f"{1000 + s} 1.0 {k * 300 + s}\n" for s in range(300))
        (run / "metrics" / f"m{k}").write_text(lines)
    ran = trainprobe("logs", run, timeout=120)
    ok(ran, 2, seconds=30, rss_mb=800)
    assert "too sparse" in ran.out


def test_prose_is_rejected_quickly(tmp_path: Path) -> None:
    words = "the model of training was a very good and data batch loader from which we can see"
    words_list = words.split(" ")
    log = tmp_path / "prose.log"
    with open(log, "w") as fh:
        for i in range(200_000):
            fh.write(" ".join(words_list[(i + j) % len(words_list)] for j in range(10)) + "\n")
        fh.write("step 1 loss 1.0\nstep 2 loss 1.0\nstep 3 loss 1.0\n")
    ok(trainprobe("logs", log), 0)


def test_a_catastrophic_pattern_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("a" * 30 + "b\n")
    ran = trainprobe("logs", log, "--pattern", "(?P<step>a+)+$")
    ok(ran, 2, seconds=5)
    assert "--pattern" in ran.out
    ok(trainprobe("logs", log, "--event", "(a|ab)*c"), 2, seconds=5)


def _small_logs(root: Path, count: int) -> None:
    for d in range(0, count, 1000):
        sub = root / f"d{d // 1000:03d}"
        sub.mkdir()
        for i in range(d, min(d + 1000, count)):
            (sub / f"{i}.log").write_text(f"step 1 loss 1.0\nstep 2 loss {1.0 + i % 7}\nstep 3 loss 1.0\n")


def test_100000_small_logs_are_read_up_to_the_bound_and_the_rest_said(tmp_path: Path) -> None:
    """Reading every one is minutes: ``logs`` and ``triage`` read the first 2,000 (``--max-logs``), say how
    many more there are, and exit 2 (incomplete), within the issue's 10 s of CPU."""
    _small_logs(tmp_path, 100_000)
    ran = trainprobe("logs", "--json", tmp_path, timeout=120)
    ok(ran, 2)
    doc = json.loads(ran.out)
    assert len(doc["runs"]) == 2000
    assert doc["not_read"] == [
        {
            "path": str(tmp_path),
            "why": "98,000 log files under it, past the 2,000 log files a command reads "
            "(--max-logs N reads more, 0 every one)",
        }
    ]
    ran = trainprobe("triage", "--json", tmp_path, timeout=120)
    ok(ran, 2)
    report = json.loads(ran.out)
    assert len(report["log_files"]) == 2000
    skipped = report["logs_skipped"]
    assert any("98,000 log files under it" in s["why"] for s in skipped), skipped


def test_max_logs_bounds_what_is_read_and_0_reads_every_one(tmp_path: Path) -> None:
    _small_logs(tmp_path, 30)
    ran = trainprobe("logs", "--max-logs", "10", tmp_path)
    ok(ran, 2)
    assert "20 log files under it, past the 10 log files a command reads" in ran.out
    assert "the report is incomplete" in ran.out
    ok(trainprobe("logs", "--max-logs", "0", tmp_path), (0, 1))
    files = sorted(tmp_path.glob("*/*.log"))[:3]
    ran = trainprobe("logs", "--max-logs", "2", *files)
    ok(ran, 2)
    assert f"not read {files[2]}: past the 2 log files a command reads" in ran.out, ran.out
    ran = trainprobe("triage", "--max-logs", "10", tmp_path)
    ok(ran, 2)
    assert "20 log files under it" in ran.out, ran.out
    assert "not everything could be read" in ran.out, ran.out


def test_the_bound_counts_a_run_directory_and_the_logs_beside_it(tmp_path: Path) -> None:
    """A W&B run directory past the bound is one log not read, and a log file beside it one more."""
    from trainprobe.metrics import Options, analyze

    nan_log(tmp_path / "a.log")
    shutil.copytree(REAL_WANDB, tmp_path / "wandb", symlinks=True)
    (run_dir,) = (
        p for p in (tmp_path / "wandb").iterdir() if p.is_dir() and p.name.startswith("offline-run")
    )
    nan_log(run_dir / "train.log")
    report = analyze(tmp_path, options=Options(max_logs=1))
    assert [r.path for r in report.runs] == [str(tmp_path / "a.log")]
    assert [(n.path, n.why.split(",")[0]) for n in report.not_read] == [
        (str(tmp_path), "2 log files under it")
    ]
    assert len(analyze(tmp_path, options=Options(max_logs=0)).runs) >= 3


def test_a_sparse_3_gb_wandb_record_log_is_streamed(tmp_path: Path) -> None:
    records = next(REAL_WANDB.glob("*/run-*.wandb"))
    log = tmp_path / "run-big.wandb"
    shutil.copyfile(records, log)
    os.truncate(log, 3 << 30)
    ran = trainprobe("logs", "--json", log)
    ok(ran, 0, rss_mb=300)
    assert json.loads(ran.out)["runs"][0]["rows"] == 300


def test_a_tree_1100_levels_deep_is_walked(tmp_path: Path, deep_tree: Path) -> None:
    (deep_tree / "x.log").write_bytes(
        b"".join(f"step {i} loss {'nan' if i == 30 else 1.0}\n".encode() for i in range(60))
    )
    ran = trainprobe("logs", tmp_path)
    ok(ran, 1)
    assert "loss is NaN at step 30" in ran.out
