"""The argv trainprobe builds: pure functions compared to lists, and every word in the safe alphabet."""

from __future__ import annotations

import shlex

import pytest

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote import parse_target, shell
from trainprobe.remote.argv import BOOT, bootstrap_argv, build_argv, stage1_word
from trainprobe.remote.hops.records import FarSettings


def test_bootstrap_with_a_named_interpreter_starts_it_directly() -> None:
    argv = bootstrap_argv(FarSettings(venv="/root/venv/"), ())
    assert argv[:3] == ["/root/venv/bin/python", "-c", BOOT]
    assert argv[3] == stage1_word()


def test_bootstrap_without_one_asks_sh_for_python3_then_python() -> None:
    argv = bootstrap_argv(FarSettings(), ("torch",))
    assert argv[:2] == ["sh", "-c"]
    assert "python3 python" in argv[2]
    assert argv[3] == BOOT


def test_every_word_is_safe_for_every_login_shell() -> None:
    target = parse_target("ssh=a//ssh=b//sudo//conda=x//env=A=it's!")
    argv = build_argv(target, need=("torch",))
    words = shlex.split(argv[-1])  # what the remote login shell hands to sudo
    assert words == build_argv(parse_target("sudo//conda=x//env=A=it's!"), need=("torch",))
    assert all(not shell.unsafe_characters(word) for word in [*argv[:-1], *words])
    assert argv[-1] == " ".join(f"'{word}'" for word in words)


def test_adjacent_ssh_hops_become_proxyjump() -> None:
    argv = build_argv(
        parse_target("ssh=u@a:2200//ssh=b//ssh=root@c:22//python=/py"),
        connect_timeout=7.5,
        control_dir="/tmp/cm",
        ssh_config="/etc/tp_config",
    )
    assert argv[0] == "ssh"
    assert argv.count("ssh") == 1  # one client, no ssh inside a quoted command
    assert argv[argv.index("-J") + 1] == "u@a:2200,b"
    assert argv[argv.index("-F") + 1] == "/etc/tp_config"
    assert "ConnectTimeout=8" in argv
    assert "ControlPath=/tmp/cm/%C" in argv
    assert argv[-7:-1] == ["-p", "22", "-l", "root", "--", "c"]
    assert argv[-1].startswith("'/py' '-c' '")


def test_sudo_wraps_without_a_shell() -> None:
    argv = build_argv(parse_target("local//python=/py"))
    assert build_argv(parse_target("sudo=train//python=/py")) == ["sudo", "-n", "-u", "train", "--", *argv]


def test_ssh_after_another_wrapping_hop_is_refused_not_misquoted() -> None:
    with pytest.raises(TargetSyntaxError, match="ProxyJump"):
        build_argv(parse_target("ssh=a//sudo//ssh=b"))


@pytest.mark.parametrize("word", ["a'b", "a\\b", "a!b", "a\nb", "tab\there", "é"])
def test_unsafe_words_are_rejected(word: str) -> None:
    assert shell.unsafe_characters(word)
    with pytest.raises(TargetSyntaxError):
        shell.quote(word)


def test_both_ends_agree_on_the_protocol() -> None:
    from trainprobe.remote import _discovery, _stage1, agent, frames

    assert frames.MAGIC == _stage1.MAGIC
    assert _discovery.OUR_BOOT.decode() in BOOT
    assert (frames.STDOUT, frames.STDERR, frames.READY, frames.EXIT) == (
        agent.STDOUT, agent.STDERR, agent.READY, agent.EXIT,
    )  # fmt: skip
    assert frames.HEARTBEAT_FRAME[:1] == agent.HEARTBEAT
