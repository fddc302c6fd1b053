"""Target strings parse into frozen dataclasses that print back the same; mistakes name the bad part."""

from __future__ import annotations

import pytest

from trainprobe.errors import TargetSyntaxError, UsageError
from trainprobe.remote import parse_target
from trainprobe.remote.hops import HOP_KINDS
from trainprobe.remote.hops.protocols import Hop, SettingHop, WrappingHop
from trainprobe.remote.hops.records import FarSettings
from trainprobe.remote.hops.ssh import SshHop
from trainprobe.remote.hops.sudo import SudoHop


@pytest.mark.parametrize(
    "text",
    [
        "local",
        "ssh=gpu07",
        "ssh=root@10.1.2.6",
        "ssh=me@host:2222",
        "ssh=[::1]:22",
        "ssh=bastion//ssh=root@gpu07:2222//sudo",
        "ssh=h//sudo=train//venv=/opt/venv//cd=/data//env=CUDA_VISIBLE_DEVICES=0,1",
        "local//python=/usr/bin/python3.11",
        "ssh=h//conda=train",
        "venv=/root/venv",
    ],
)
def test_target_prints_back_the_same_string(text: str) -> None:
    target = parse_target(text)
    assert str(target) == text
    assert parse_target(str(target)) == target


def test_parsed_fields() -> None:
    target = parse_target(
        "ssh=bastion//ssh=root@gpu07:2222//sudo=train//venv=/opt/v//cd=/d//env=A=1//env=B=x=y"
    )
    assert target.wrapping == (SshHop("bastion"), SshHop("gpu07", "root", 2222), SudoHop("train"))
    assert target.settings == FarSettings(venv="/opt/v", cwd="/d", env=(("A", "1"), ("B", "x=y")))


def test_every_registered_kind_follows_its_protocol() -> None:
    examples = {"local": None, "sudo": None, "env": "A=1"}
    for kind, cls in HOP_KINDS.items():
        hop = cls.parse(examples.get(kind, "1700"), {})
        assert isinstance(hop, Hop)
        assert isinstance(hop, WrappingHop) != isinstance(hop, SettingHop), kind
        assert hop.kind == kind


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(TargetSyntaxError) as info:
        parse_target("ssh=h//dokcer=x")
    message = str(info.value)
    assert "'dokcer'" in message
    for kind in ("ssh", "sudo", "venv", "local"):
        assert kind in message
    assert isinstance(info.value, UsageError)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty target"),
        ("ssh=", "ssh= needs a value"),
        ("ssh=h:99999", "port '99999'"),
        ("ssh=h//", "empty hop"),
        ("venv=/v//ssh=h", "comes after venv=/v"),
        ("ssh=h//local", "local can only be the first hop"),
        ("ssh=h,foo=1", "no option 'foo'"),
        ("env=1A=2", "valid variable name"),
        ("venv=/it's", 'contains "\'"'),
        ("python=/x!y", "contains '!'"),
        ("ssh=h\\x", "contains '\\\\'"),
    ],
)
def test_mistakes_name_the_bad_part(text: str, expected: str) -> None:
    with pytest.raises(TargetSyntaxError) as info:
        parse_target(text)
    assert expected in str(info.value)
