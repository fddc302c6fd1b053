"""The container/cluster hops as pure functions: target text → hop → argv, compared to lists; bad values → one
TargetSyntaxError naming the problem; a tool's real error message → one clear reason."""

from __future__ import annotations

import pytest

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote.argv import build_argv
from trainprobe.remote.hops import HOP_KINDS
from trainprobe.remote.shell import unsafe_characters
from trainprobe.remote.target import parse_target

INNER = ["python3", "-c", "pass"]

# (target string, argv that runs INNER through it)
WRAPS = [
    ("pct=200", ["pct", "exec", "200", "--", *INNER]),
    ("docker=trainer", ["docker", "exec", "-i", "trainer", *INNER]),
    ("docker=trainer,user=1000:1000", ["docker", "exec", "-i", "--user", "1000:1000", "trainer", *INNER]),
    (
        "docker=trainer,socket=/run/user/1000/docker.sock",
        ["docker", "--host", "unix:///run/user/1000/docker.sock", "exec", "-i", "trainer", *INNER],
    ),
    ("podman=trainer,user=ml", ["podman", "exec", "-i", "--user", "ml", "trainer", *INNER]),
    (
        "podman=t,socket=/run/podman/podman.sock",
        ["podman", "--url", "unix:///run/podman/podman.sock", "exec", "-i", "t", *INNER],
    ),
    ("kubectl=trainer-0", ["kubectl", "exec", "-i", "trainer-0", "--", *INNER]),
    (
        "kubectl=trainer-0,namespace=ml,container=main,context=prod",
        [
            "kubectl",
            "--context",
            "prod",
            "exec",
            "-i",
            "--namespace",
            "ml",
            "trainer-0",
            "--container",
            "main",
            "--",
            *INNER,
        ],
    ),
    ("kubectl=deploy/trainer", ["kubectl", "exec", "-i", "deploy/trainer", "--", *INNER]),
    ("lxc=c1", ["lxc-attach", "-n", "c1", "--", *INNER]),
    ("lxc=c1,lxcpath=/srv/lxc", ["lxc-attach", "-P", "/srv/lxc", "-n", "c1", "--", *INNER]),
    ("incus=trainer", ["incus", "exec", "trainer", "--mode=non-interactive", "--", *INNER]),
    (
        "incus=remote1:trainer,project=ml,user=1000",
        [
            "incus",
            "--project",
            "ml",
            "exec",
            "remote1:trainer",
            "--mode=non-interactive",
            "--user",
            "1000",
            "--",
            *INNER,
        ],
    ),
    (
        "slurm=123456",
        [
            "srun",
            "--jobid=123456",
            "--overlap",
            "--nodes=1",
            "--ntasks=1",
            "--unbuffered",
            "--quiet",
            "--",
            *INNER,
        ],
    ),
    (
        "slurm=123456@node07",
        [
            "srun",
            "--jobid=123456",
            "--overlap",
            "--nodes=1",
            "--ntasks=1",
            "--nodelist=node07",
            "--unbuffered",
            "--quiet",
            "--",
            *INNER,
        ],
    ),
    (
        "slurm=123_4",
        [
            "srun",
            "--jobid=123_4",
            "--overlap",
            "--nodes=1",
            "--ntasks=1",
            "--unbuffered",
            "--quiet",
            "--",
            *INNER,
        ],
    ),
]


@pytest.mark.parametrize(("text", "argv"), WRAPS)
def test_wrap(text: str, argv: list[str]) -> None:
    (hop,) = parse_target(text).hops
    assert hop.wrap(INNER) == argv  # type: ignore[attr-defined]
    assert hop.spec() == text
    assert str(parse_target(text)) == text
    assert not any(unsafe_characters(word) for word in argv)


def test_every_container_kind_is_registered() -> None:
    for kind in ("pct", "docker", "podman", "kubectl", "lxc", "incus", "slurm"):
        assert HOP_KINDS[kind].kind == kind


def test_options_print_back_in_one_order() -> None:
    target = parse_target("kubectl=p,context=c,container=x,namespace=n")
    assert str(target) == "kubectl=p,namespace=n,container=x,context=c"


def test_never_a_terminal() -> None:
    for text in ("docker=a", "podman=a", "kubectl=a", "incus=a", "slurm=1", "lxc=a", "pct=100"):
        argv = parse_target(text).hops[0].wrap(INNER)  # type: ignore[attr-defined]
        assert not {"-t", "-it", "--tty", "--pty"} & set(argv), text


def test_chain_through_ssh_builds_one_command() -> None:
    argv = build_argv(parse_target("ssh=root@10.1.2.6//pct=200//venv=/root/venv"))
    assert argv[0] == "ssh"
    remote_command = argv[-1]
    assert remote_command.startswith("'pct' 'exec' '200' '--' '/root/venv/bin/python' '-c' ")


def test_slurm_inside_docker_on_a_login_node() -> None:
    argv = build_argv(parse_target("ssh=login1//slurm=77@gpu03//docker=trainer"))
    words = argv[-1].split(" ")
    assert words[:8] == [
        "'srun'",
        "'--jobid=77'",
        "'--overlap'",
        "'--nodes=1'",
        "'--ntasks=1'",
        "'--nodelist=gpu03'",
        "'--unbuffered'",
        "'--quiet'",
    ]
    assert words[9:13] == ["'docker'", "'exec'", "'-i'", "'trainer'"]


# (target string, words the error message must contain)
BAD = [
    ("pct=abc", "VMID"),
    ("pct=99", "VMID"),
    ("pct", "needs a value"),
    ("docker", "needs a value"),
    ("docker=-rm", "may not start with '-'"),
    ("docker=a,tty=1", "has no option 'tty' (options: user, socket)"),
    ("docker=a,socket=run/docker.sock", "absolute path"),
    ("docker=it's", "'"),
    ("podman=a,user=x!y", "'!'"),
    ("kubectl=p,ns=ml", "options: namespace, container, context"),
    ("lxc=a,lxcpath=relative", "absolute path"),
    ("incus=a,user=root", "numeric uid"),
    ("slurm=abc", "not a Slurm job id"),
    ("slurm=12@", "needs a value"),
    ("slurm=12,node=x", "has no option 'node'"),
]


@pytest.mark.parametrize(("text", "words"), BAD)
def test_bad_values_are_one_clear_error(text: str, words: str) -> None:
    with pytest.raises(TargetSyntaxError) as info:
        parse_target(text)
    assert words in str(info.value)
    assert info.value.exit_code == 2


def test_unknown_kind_lists_the_container_kinds() -> None:
    with pytest.raises(TargetSyntaxError) as info:
        parse_target("dockr=trainer")
    for kind in ("docker", "incus", "kubectl", "lxc", "pct", "podman", "slurm"):
        assert kind in str(info.value)


# (target, what the real tool printed on stderr — captured from the fixtures' runtimes —, reason expected)
FAILURES = [
    (
        "docker=tp",
        "Error response from daemon: Container d8a5274afa82 is not running\n",
        "container tp is not running",
    ),
    ("docker=tp", "Error response from daemon: No such container: tp\n", "no container named tp"),
    (
        "podman=tp",
        "Error: can only create exec sessions on running containers: container state improper\n",
        "container tp is not running",
    ),
    (
        "podman=tp",
        'Error: no container with name or ID "tp" found: no such container\n',
        "no container named tp",
    ),
    (
        "lxc=c1",
        "lxc-attach: c1: ../src/lxc/attach.c: get_attach_context: 406 Connection refused - Failed to get "
        "init pid\n",
        "container c1 is not running (or does not exist)",
    ),
    ("pct=201", "CT 201 not running\n", "CT 201 is not running"),
    (
        "pct=999",
        "Configuration file 'nodes/pve/lxc/999.conf' does not exist\n",
        "there is no CT 999 on this node",
    ),
    ("slurm=2", "srun: error: Slurm job 2 has expired\n", "Slurm job 2 has ended"),
    (
        "slurm=9999",
        "srun: error: Unable to confirm allocation for job 9999: Invalid job id specified\n",
        "there is no Slurm job 9999 (ended long ago or never existed)",
    ),
    (
        "slurm=1@gpu9",
        "srun: error: Unable to create step for job 1: Requested node configuration is not available\n",
        "node gpu9 is not part of job 1",
    ),
    (
        "kubectl=nope,namespace=ml",
        'Error from server (NotFound): pods "nope" not found\n',
        "pod nope not found in namespace ml",
    ),
    (
        "kubectl=p,container=side",
        'error: unable to upgrade connection: container not found ("side")\n',
        "pod p has no container side",
    ),
    ("incus=t", "Error: Instance is not running\n", "instance t is not running"),
]


@pytest.mark.parametrize(("text", "stderr", "reason"), FAILURES)
def test_tool_messages_become_one_reason(text: str, stderr: str, reason: str) -> None:
    (hop,) = parse_target(text).hops
    found = hop.explain_failure(stderr, 1)  # type: ignore[attr-defined]
    assert found is not None
    assert found.reason == reason
    assert found.hint  # always something to try


def test_unrelated_messages_are_left_alone() -> None:
    for text in ("docker=a", "podman=a", "lxc=a", "pct=100", "slurm=1", "kubectl=a", "incus=a"):
        (hop,) = parse_target(text).hops
        assert hop.explain_failure("bash: warning: setlocale: LC_ALL: cannot change locale\n", 1) is None  # type: ignore[attr-defined]
