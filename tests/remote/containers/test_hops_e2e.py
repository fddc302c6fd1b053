"""Each container/cluster hop end to end: the real runtime, a script full of shell metacharacters, arguments
that must arrive byte-identical, interpreter discovery inside the container, and one clear error when the
container, job or pod is not there."""

from __future__ import annotations

import os
import socket

import pytest

from trainprobe.errors import UnreachableError
from trainprobe.remote import run
from trainprobe.remote.fanout import run_fleet
from trainprobe.remote.live_output import LinePrefixer
from trainprobe.remote.session import RunResult

pytestmark = pytest.mark.containers

# Every character here means something to some shell: braces, both quotes, !, $, backticks, globs, non-ASCII.
SCRIPT = """\
import os, sys
name = "wörld"
print(f"héllo {name} {{braces}} $HOME `id` !! 'single' \\"double\\" ${{x}} * ?")
sys.stderr.write("to stderr: ünï\\n")
EOF = "EOF"


def main():
    import importlib.util
    return {
        "argv": sys.argv[1:],
        "venv_marker": importlib.util.find_spec("tp_venv_marker") is not None,
        "python": sys.executable,
        "host": os.uname().nodename,
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
    }
"""
ARGS = ["a b", "it's", '"dq"', "$HOME", "`id`", "!x", "{a,b}", "*", "ünï €", ";|&<>()", "\\n", "--", "-c"]
EXPECTED_LINE = "héllo wörld {braces} $HOME `id` !! 'single' \"double\" ${x} * ?\n"


def run_script(target: str) -> tuple[RunResult, str, str]:
    out: list[bytes] = []
    err: list[bytes] = []
    result = run(target, SCRIPT, ARGS, timeout=60, stdout=out.append, stderr=err.append)
    return result, b"".join(out).decode(), b"".join(err).decode()


def assert_ran_inside(result: RunResult, out: str, err: str) -> None:
    assert result.error is None, result.error
    assert result.exit_code == 0
    assert out == EXPECTED_LINE
    assert err == "to stderr: ünï\n"
    assert result.result["argv"] == ARGS


def assert_inside_container(result: RunResult) -> None:
    # discovery ran again inside: it found the image's own venv, a path that does not exist on this host
    assert result.result["python"] == "/opt/venv/bin/python"
    assert result.result["venv_marker"] is True
    assert not os.path.exists("/opt/venv/bin/python")
    assert result.result["host"] != socket.gethostname()


def assert_clear_error(result: RunResult, *words: str) -> None:
    assert isinstance(result.error, UnreachableError), result.error
    message = str(result.error)
    for word in words:
        assert word in message, message
    assert result.exit_code != 0


def test_docker(docker) -> None:
    result, out, err = run_script(f"docker={docker.running}")
    assert_ran_inside(result, out, err)
    assert_inside_container(result)


def test_docker_user_and_socket_options(dockerd) -> None:
    # no DOCKER_HOST here: socket= alone must find the daemon
    script = "import os\ndef main():\n    return [os.getuid(), os.getgid()]\n"
    result = run(f"docker={dockerd.running},user=65534:65534,socket={dockerd.socket}", script, timeout=60)
    assert result.error is None, result.error
    assert result.result == [65534, 65534]


def test_docker_stopped_container(docker) -> None:
    result = run(f"docker={docker.stopped}", SCRIPT, timeout=60)
    assert_clear_error(result, f"container {docker.stopped} is not running", f"docker start {docker.stopped}")


def test_docker_missing_container(docker) -> None:
    result = run("docker=no-such-ctr", SCRIPT, timeout=60)
    assert_clear_error(result, "no container named no-such-ctr")


def test_podman(podman) -> None:
    result, out, err = run_script(f"podman={podman.running}")
    assert_ran_inside(result, out, err)
    assert_inside_container(result)


def test_podman_stopped_container(podman) -> None:
    result = run(f"podman={podman.stopped}", SCRIPT, timeout=60)
    assert_clear_error(result, f"container {podman.stopped} is not running", f"podman start {podman.stopped}")


def test_lxc(lxc) -> None:
    result, out, err = run_script(f"lxc={lxc.running},lxcpath={lxc.lxcpath}")
    assert_ran_inside(result, out, err)
    assert_inside_container(result)
    assert result.result["host"] == lxc.running


def test_lxc_stopped_container(lxc) -> None:
    result = run(f"lxc={lxc.stopped},lxcpath={lxc.lxcpath}", SCRIPT, timeout=60)
    assert_clear_error(result, f"container {lxc.stopped} is not running")


def test_pct(lxc) -> None:
    result, out, err = run_script(f"pct={lxc.pct_id}")
    assert_ran_inside(result, out, err)
    assert_inside_container(result)
    assert result.result["host"] == lxc.pct_id


def test_pct_stopped_container(lxc) -> None:
    result = run(f"pct={lxc.pct_stopped_id}", SCRIPT, timeout=60)
    assert_clear_error(result, f"CT {lxc.pct_stopped_id} is not running", f"pct start {lxc.pct_stopped_id}")


@pytest.mark.slurm
def test_slurm_step_in_running_job(slurm) -> None:
    result, out, err = run_script(f"slurm={slurm.job}@{slurm.node}")
    assert_ran_inside(result, out, err)
    assert result.result["slurm_job"] == slurm.job


@pytest.mark.slurm
def test_slurm_job_fans_out_to_its_nodes(slurm) -> None:
    lines: list[bytes] = []
    prefixer = LinePrefixer([f"slurm={slurm.job}"], lambda stream, line: lines.append(line))
    fleet = run_fleet(
        [f"slurm={slurm.job}"],
        SCRIPT,
        ARGS,
        timeout=60,
        on_output=prefixer.write,
        on_plan=prefixer.set_targets,
    )
    node_target = f"slurm={slurm.job}@{slurm.node}"
    assert [o.target for o in fleet.outcomes] == [node_target]
    assert fleet.exit_code == 0
    assert fleet.outcomes[0].result["argv"] == ARGS
    assert f"{node_target} | {EXPECTED_LINE}".encode() in lines


@pytest.mark.slurm
def test_slurm_ended_job(slurm) -> None:
    result = run(f"slurm={slurm.ended_job}", SCRIPT, timeout=60)
    assert_clear_error(result, f"Slurm job {slurm.ended_job} has ended")
    fleet = run_fleet([f"slurm={slurm.ended_job}"], SCRIPT, timeout=60)
    assert fleet.exit_code == 1
    assert fleet.outcomes[0].status == "unreachable"
    assert f"Slurm job {slurm.ended_job} has ended" in fleet.outcomes[0].summary


def test_kubectl_against_fake_api_server(kube) -> None:
    result, out, err = run_script("kubectl=trainer-1,namespace=ml,container=main")
    assert_ran_inside(result, out, err)
    (request,) = [r for r in kube.requests() if r["pod"] == "trainer-1"]
    assert request["namespace"] == "ml"
    assert request["container"] == "main"
    # the command kubectl sent is the engine's bootstrap, never the script or its arguments
    assert not any("héllo" in word or "it's" in word for word in request["command"])


def test_kubectl_missing_pod(kube) -> None:
    result = run("kubectl=nope-0", SCRIPT, timeout=60)
    assert_clear_error(result, "pod nope-0 not found")


@pytest.mark.ssh
def test_chain_ssh_docker_venv(sshd, dockerd) -> None:
    # the docker client runs on the far side of ssh, finding the daemon through socket=
    target = f"{sshd.target('root')}//docker={dockerd.running},socket={dockerd.socket}//venv=/opt/venv"
    result, out, err = run_script(target)
    assert_ran_inside(result, out, err)
    assert_inside_container(result)


@pytest.mark.ssh
def test_chain_ssh_to_a_stopped_container(sshd, dockerd) -> None:
    target = f"{sshd.target('root')}//docker={dockerd.stopped},socket={dockerd.socket}"
    result = run(target, SCRIPT, timeout=60)
    assert_clear_error(result, f"container {dockerd.stopped} is not running")
