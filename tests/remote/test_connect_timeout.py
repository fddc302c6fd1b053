"""``connect_timeout`` fires on time: against an address that silently drops packets, and against
login scripts that hang."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from fixtures.sshd import SshServer
from trainprobe.errors import UnreachableError
from trainprobe.remote import run


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture
def blackhole() -> Iterator[str]:
    """An address in a network namespace (reached over a veth pair) whose firewall drops every packet."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        pytest.skip("needs root, iproute2 and iptables (see .ci/run)")
    tag = f"{os.getpid() % 100000}"
    ns, host_if, ns_if = f"tpbh{tag}", f"tpbh{tag}a", f"tpbh{tag}b"
    subnet = f"10.213.{os.getpid() % 250}"
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns)
        sh("ip", "addr", "add", f"{subnet}.1/30", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        sh("ip", "-n", ns, "addr", "add", f"{subnet}.2/30", "dev", ns_if)
        sh("ip", "-n", ns, "link", "set", ns_if, "up")
        sh("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-j", "DROP")
        yield f"{subnet}.2"
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.timing
@pytest.mark.netns
def test_connect_timeout_fires_against_a_silent_address(
    blackhole: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINPROBE_CONTROL_DIR", "")
    start = time.monotonic()
    result = run(f"ssh=root@{blackhole}", "pass\n", connect_timeout=2.0, timeout=60)
    elapsed = time.monotonic() - start
    assert isinstance(result.error, UnreachableError)
    assert result.exit_code == 255
    assert 1.5 < elapsed < 2 + 8  # the connect timeout, with room for a loaded machine
    assert "2 s" in str(result.error) or "timed out" in str(result.error)


@pytest.mark.timing
@pytest.mark.ssh
def test_connect_timeout_covers_hanging_login_scripts(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINPROBE_CONTROL_DIR", "")
    user = sshd.setup.users["zsh"]
    zshenv = sshd.setup.home("zsh") / ".zshenv"
    zshenv.write_text("sleep 27\n")
    try:
        start = time.monotonic()
        result = run(sshd.target("zsh"), "pass\n", connect_timeout=2.0)
        elapsed = time.monotonic() - start
    finally:
        zshenv.unlink()
        subprocess.run(["pkill", "-u", user, "-f", "sleep 27"], capture_output=True)
    assert isinstance(result.error, UnreachableError)
    assert "no answer within the connect timeout (2 s)" in str(result.error)
    assert 1.8 < elapsed < 2 + 8  # the connect timeout, with room for a loaded machine
