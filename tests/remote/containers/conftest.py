"""Real container runtimes and a real Slurm for the container/cluster hop tests.

Each fixture starts its own daemon with all state in a temporary directory, and stops it at the end of the
session:

- ``dockerd``: Debian's ``docker.io`` engine without bridge, iptables or IP forwarding (no network needed),
  its own data-root, exec-root and socket; a running and a stopped container made from :mod:`_rootfs` (no
  registry pulls).
- ``podman_host``: rootful podman with runc, cgroupfs and vfs storage, configured through its own
  ``containers.conf``/``storage.conf`` (``CONTAINERS_CONF``/``CONTAINERS_STORAGE_CONF``).
- ``lxc_host``: privileged LXC containers from a directory rootfs under a private lxcpath, plus a ``pct``
  stand-in: Proxmox's ``pct exec ID -- CMD`` checks that the container runs and then executes ``lxc-attach -n
  ID -- CMD``, which is what the stand-in does (Proxmox itself cannot be installed here).
- ``slurm_cluster``: munged with its own key, slurmctld and slurmd for this one node, and a job allocation
  made with ``salloc --no-shell`` to attach steps to (``srun --jobid=J --overlap``).
- ``kube_api``: the real ``kubectl`` against :mod:`fake_kube_apiserver` (no Kubernetes can run here).

A fixture skips only when the component's program is not installed (``.ci/run`` installs them all); once the
program is there, a daemon that does not come up fails the test with its log.

Tests that need one of them take the function-scoped fixture of the same name without the daemon part
(``docker``, ``podman``, ``lxc``, ``slurm``, ``kube``), which also points this process's environment at it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _rootfs import build_rootfs, tar_rootfs

HERE = Path(__file__).parent
IMAGE = "tp-mini:latest"


def need_program(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (.ci/run installs it)")


def wait_until(check: Callable[[], bool], timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)  # polling interval
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    pytest.fail(f"{what} did not come up within {timeout:.0f} s\n{tail}")


def run(
    argv: list[str], env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(argv, capture_output=True, text=True, env=full_env, check=False, timeout=120)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's run logs go to its own temporary directory, not the user's state directory."""
    path = tmp_path / "runs"
    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(path))
    return path


@dataclass(frozen=True)
class MiniRootfs:
    root: Path
    tar: Path


@pytest.fixture(scope="session")
def mini_rootfs(tmp_path_factory: pytest.TempPathFactory) -> MiniRootfs:
    need_program("ldd", "chroot")
    base = tmp_path_factory.mktemp("rootfs")
    root = build_rootfs(base / "root")
    return MiniRootfs(root=root, tar=tar_rootfs(root, base / "rootfs.tar"))


# --- docker -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DockerDaemon:
    socket: Path
    running: str = "tp-trainer"
    stopped: str = "tp-stopped"

    @property
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": f"unix://{self.socket}"}

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["docker", *args], env=self.env, check=check)


@pytest.fixture(scope="session")
def dockerd(tmp_path_factory: pytest.TempPathFactory, mini_rootfs: MiniRootfs) -> Iterator[DockerDaemon]:
    need_program("dockerd", "docker")
    base = tmp_path_factory.mktemp("docker")
    daemon = DockerDaemon(socket=base / "docker.sock")
    log = base / "dockerd.log"
    with log.open("wb") as logf:
        proc = subprocess.Popen(
            [
                "dockerd",
                "--data-root", str(base / "data"),
                "--exec-root", str(base / "exec"),
                "--pidfile", str(base / "dockerd.pid"),
                "--host", f"unix://{daemon.socket}",
                # no network for the containers: nothing here may touch the host's bridges or firewall
                "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
                "--ip-forward=false",
                "--exec-opt", "native.cgroupdriver=cgroupfs",
                "--default-ulimit", "nofile=4096:4096", "--default-ulimit", "nproc=4096:4096",
            ],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until(lambda: daemon.docker("version", check=False).returncode == 0, 60, "dockerd", log)
        daemon.docker("import", str(mini_rootfs.tar), IMAGE)
        common = ["--network", "none", IMAGE, "/usr/bin/sleep", "infinity"]
        daemon.docker("run", "--detach", "--name", daemon.running, *common)
        daemon.docker("create", "--name", daemon.stopped, *common)
        yield daemon
    finally:
        daemon.docker("rm", "--force", daemon.running, daemon.stopped, check=False)
        stop_process(proc)
        netns = base / "exec" / "netns" / "default"
        if netns.exists():
            run(["umount", str(netns)], check=False)


@pytest.fixture
def docker(dockerd: DockerDaemon, monkeypatch: pytest.MonkeyPatch) -> DockerDaemon:
    for key, value in dockerd.env.items():
        monkeypatch.setenv(key, value)
    return dockerd


# --- podman -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodmanHost:
    conf: Path
    storage_conf: Path
    running: str = "tp-pm"
    stopped: str = "tp-pm-stopped"

    @property
    def env(self) -> dict[str, str]:
        return {"CONTAINERS_CONF": str(self.conf), "CONTAINERS_STORAGE_CONF": str(self.storage_conf)}

    def podman(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["podman", *args], env=self.env, check=check)


@pytest.fixture(scope="session")
def podman_host(tmp_path_factory: pytest.TempPathFactory, mini_rootfs: MiniRootfs) -> Iterator[PodmanHost]:
    need_program("podman", "runc")
    base = tmp_path_factory.mktemp("podman")
    for sub in ("root", "run", "tmp"):
        (base / sub).mkdir()
    host = PodmanHost(conf=base / "containers.conf", storage_conf=base / "storage.conf")
    host.storage_conf.write_text(
        f'[storage]\ndriver = "vfs"\nrunroot = "{base}/run"\ngraphroot = "{base}/root"\n', encoding="utf-8"
    )
    # runc: crun refuses the hybrid cgroup layout of these machines; file events: there is no journald;
    # explicit ulimits: without CAP_SYS_RESOURCE the runtime cannot raise the inherited ones.
    host.conf.write_text(
        "[containers]\n"
        'log_driver = "k8s-file"\n'
        'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
        "[engine]\n"
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        'runtime = "runc"\n'
        f'tmp_dir = "{base}/tmp"\n',
        encoding="utf-8",
    )
    ids: list[str] = []
    try:
        host.podman("import", "--quiet", str(mini_rootfs.tar), f"localhost/{IMAGE}")
        common = ["--network", "none", f"localhost/{IMAGE}", "/usr/bin/sleep", "infinity"]
        ids.append(host.podman("run", "--detach", "--name", host.running, *common).stdout.strip())
        ids.append(host.podman("create", "--name", host.stopped, *common).stdout.strip())
        yield host
    finally:
        host.podman("rm", "--force", "--time", "0", host.running, host.stopped, check=False)
        host.podman("rmi", "--all", "--force", check=False)
        # conmon of an exec session can outlive its container by a few seconds: end the ones of our containers
        for pid in _pids_whose_cmdline_has("conmon", ids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _pids_whose_cmdline_has(program: str, needles: list[str]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        words = cmdline.split("\0")
        if words and Path(words[0]).name == program and any(n and n in cmdline for n in needles):
            found.append(int(entry.name))
    return found


@pytest.fixture
def podman(podman_host: PodmanHost, monkeypatch: pytest.MonkeyPatch) -> PodmanHost:
    for key, value in podman_host.env.items():
        monkeypatch.setenv(key, value)
    return podman_host


# --- LXC and the pct stand-in -------------------------------------------------------------------------------

PCT_STANDIN = """#!/bin/sh
# Stand-in for Proxmox's pct (only `pct exec`): like pve-container's pct, check that the container exists and
# runs, then exec lxc-attach -n VMID -- CMD. TP_LXCPATH points at the test's lxcpath (Proxmox: /var/lib/lxc).
lxcpath=${TP_LXCPATH:-/var/lib/lxc}
[ "$1" = exec ] || { echo "pct stand-in: only 'exec' is implemented" >&2; exit 255; }
vmid=$2; shift 2
[ "$1" = "--" ] && shift
[ -f "$lxcpath/$vmid/config" ] ||
  { echo "Configuration file 'nodes/tp/lxc/$vmid.conf' does not exist" >&2; exit 255; }
lxc-info -P "$lxcpath" -n "$vmid" -s | grep -q RUNNING || { echo "CT $vmid not running" >&2; exit 255; }
exec lxc-attach -P "$lxcpath" -n "$vmid" -- "$@"
"""


@dataclass(frozen=True)
class LxcHost:
    lxcpath: Path
    bindir: Path
    running: str = "tp-c1"
    stopped: str = "tp-off"
    pct_id: str = "200"
    pct_stopped_id: str = "201"

    @property
    def env(self) -> dict[str, str]:
        return {"TP_LXCPATH": str(self.lxcpath), "PATH": f"{self.bindir}:{os.environ['PATH']}"}


@pytest.fixture(scope="session")
def lxc_host(tmp_path_factory: pytest.TempPathFactory, mini_rootfs: MiniRootfs) -> Iterator[LxcHost]:
    need_program("lxc-start", "lxc-attach")
    base = tmp_path_factory.mktemp("lxc")
    host = LxcHost(lxcpath=base / "lxcpath", bindir=base / "bin")
    host.bindir.mkdir()
    pct = host.bindir / "pct"
    pct.write_text(PCT_STANDIN)
    pct.chmod(0o755)
    names = [host.running, host.stopped, host.pct_id, host.pct_stopped_id]
    started: list[str] = []
    try:
        for name in names:
            cdir = host.lxcpath / name
            cdir.mkdir(parents=True)
            shutil.copytree(mini_rootfs.root, cdir / "rootfs", symlinks=True)
            (cdir / "config").write_text(
                f"lxc.uts.name = {name}\n"
                f"lxc.rootfs.path = dir:{cdir}/rootfs\n"
                "lxc.net.0.type = empty\n"
                "lxc.apparmor.profile = unconfined\n"
                "lxc.init.cmd = /usr/bin/sleep infinity\n"
                "lxc.mount.auto = proc:mixed sys:ro\n"
                "lxc.autodev = 1\n"
                f"lxc.log.file = {cdir}/{name}.log\n"
            )
        for name in (host.running, host.pct_id):
            run(["lxc-start", "-P", str(host.lxcpath), "-n", name, "-d"])
            started.append(name)
            run(["lxc-wait", "-P", str(host.lxcpath), "-n", name, "-s", "RUNNING", "-t", "20"])
        yield host
    finally:
        for name in started:
            run(["lxc-stop", "-P", str(host.lxcpath), "-n", name, "-k"], check=False)


@pytest.fixture
def lxc(lxc_host: LxcHost, monkeypatch: pytest.MonkeyPatch) -> LxcHost:
    for key, value in lxc_host.env.items():
        monkeypatch.setenv(key, value)
    return lxc_host


# --- Slurm --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmCluster:
    conf: Path
    node: str
    job: str
    ended_job: str

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}


def _salloc(env: dict[str, str]) -> str:
    out = run(["salloc", "--no-shell", "-N1", "-n1", "--time=30"], env=env)
    text = out.stdout + out.stderr
    for word in text.replace(".", " ").split():
        if word.isdigit():
            return word
    raise RuntimeError(f"salloc gave no job id: {text}")


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    need_program("slurmctld", "slurmd", "munged", "salloc", "srun")
    base = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log"):
        (base / sub).mkdir()
    # munged runs as the munge user, which cannot enter pytest's 0700 temp tree: its files go to /tmp.
    munge_dir = Path(tempfile.mkdtemp(prefix="tp-munge-"))
    munge_dir.chmod(0o755)
    shutil.chown(munge_dir, "munge", "munge")
    key = munge_dir / "munge.key"
    sock = munge_dir / "munge.sock"
    run(["runuser", "-u", "munge", "--", "mungekey", "--create", "--keyfile", str(key)])
    node = socket.gethostname().split(".")[0]
    conf = base / "slurm.conf"
    conf.write_text(
        f"ClusterName=tp\nSlurmctldHost={node}(127.0.0.1)\nSlurmctldPort={free_port()}\nSlurmdPort={free_port()}\n"
        "SlurmUser=root\nSlurmdUser=root\n"
        f"AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\nMailProg=/bin/true\n"
        f"StateSaveLocation={base}/state\nSlurmdSpoolDir={base}/spool\n"
        f"SlurmctldPidFile={base}/slurmctld.pid\nSlurmdPidFile={base}/slurmd.pid\n"
        f"SlurmctldLogFile={base}/log/slurmctld.log\nSlurmdLogFile={base}/log/slurmd.log\n"
        # no systemd and no cgroup delegation here: track processes by /proc, no task confinement
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
        "AccountingStorageType=accounting_storage/none\nMpiDefault=none\n"
        "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
        "ReturnToService=2\nInactiveLimit=0\nKillWait=2\n"
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1000 State=UNKNOWN\n"
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8\n",
        encoding="utf-8",
    )
    env = {"SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen[bytes]] = []

    def daemon(argv: list[str], log: Path, user: str | None = None) -> None:
        with log.open("wb") as logf:
            prefix = ["runuser", "-u", user, "--"] if user else []
            procs.append(
                subprocess.Popen(
                    prefix + argv,
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **env},
                )
            )

    try:
        daemon(
            ["munged", "-F", f"--socket={sock}", f"--key-file={key}", f"--pid-file={munge_dir}/munged.pid",
             f"--log-file={munge_dir}/munged.log", f"--seed-file={munge_dir}/munged.seed"],
            base / "log" / "munged.fg",
            user="munge",
        )  # fmt: skip
        wait_until(sock.exists, 10, "munged", munge_dir / "munged.log")
        daemon(["slurmctld", "-D", "-f", str(conf)], base / "log" / "slurmctld.fg")
        daemon(["slurmd", "-D", "-f", str(conf)], base / "log" / "slurmd.fg")

        def node_idle() -> bool:
            return run(["sinfo", "-h", "-o", "%T"], env=env, check=False).stdout.strip() == "idle"

        wait_until(node_idle, 30, "slurmd (node idle)", base / "log" / "slurmctld.log")
        job = _salloc(env)
        ended = _salloc(env)
        run(["scancel", ended], env=env)
        yield SlurmCluster(conf=conf, node=node, job=job, ended_job=ended)
    finally:
        run(["scancel", "--user=root"], env=env, check=False)
        for proc in reversed(procs):
            stop_process(proc)
        shutil.rmtree(munge_dir, ignore_errors=True)


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster


# --- kubectl against the fake API server --------------------------------------------------------------------


@dataclass(frozen=True)
class KubeApi:
    kubeconfig: Path
    record: Path
    pods: tuple[str, ...] = field(default=("default/trainer-0", "ml/trainer-1"))

    @property
    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig)}

    def requests(self) -> list[dict[str, object]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture(scope="session")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApi]:
    need_program("kubectl")
    base = tmp_path_factory.mktemp("kube")
    api = KubeApi(kubeconfig=base / "kubeconfig.json", record=base / "exec-requests.jsonl")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "fake_kube_apiserver.py"),
            "--pods",
            ",".join(api.pods),
            "--record",
            str(api.record),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        proc.stdout.close()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": "default"}},
                {"name": "fake-ml", "context": {"cluster": "fake", "user": "fake", "namespace": "ml"}},
            ],
            "current-context": "fake",
        }
        api.kubeconfig.write_text(json.dumps(config), encoding="utf-8")
        # kubectl >= 1.30 speaks WebSocket exec by default; older ones only SPDY, which the fake lacks
        probe = run(["kubectl", "exec", "-i", "trainer-0", "--", "true"], env=api.env, check=False)
        if probe.returncode != 0 and "websocket exec" in probe.stderr.lower():
            pytest.skip(f"this kubectl cannot exec over WebSocket: {probe.stderr.strip()[:200]}")
        yield api
    finally:
        stop_process(proc)


@pytest.fixture
def kube(kube_api: KubeApi, monkeypatch: pytest.MonkeyPatch) -> KubeApi:
    for key, value in kube_api.env.items():
        monkeypatch.setenv(key, value)
    return kube_api
