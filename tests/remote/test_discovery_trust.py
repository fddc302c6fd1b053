"""Interpreter discovery runs nothing another local user could have planted (issue 16, item 1).

A venv another user owns, or one others can write to, is never a candidate (its ``.pth`` files would run as
whoever connects, root included, even for the ``--need`` check); other users' running Pythons are not
candidates either, so what discovery finds does not depend on what else runs on the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import SshServer
from trainprobe.errors import InterpreterNotFoundError
from trainprobe.remote import run

#: a far or local Python that stays alive until the test ends it: something to find, not a wait
STAYS_ALIVE = "import time; time.sleep(60)"  # a process kept alive, not a wait


pytestmark = pytest.mark.ssh
SYSTEM_PYTHON = "/usr/bin/python3"


def make_venv(path: Path, module: str, owner: str | None = None) -> Path:
    """A venv of the system Python with ``module`` in it; its site-packages directory."""
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next(path.glob("lib/python3*/site-packages"))
    (site / f"{module}.py").write_text("WHERE = __file__\n")
    if owner:
        subprocess.run(["chown", "-R", f"{owner}:users", str(path)], check=True)
    return site


def as_user(user: str, *argv: str) -> subprocess.Popen[bytes]:
    """``argv`` running as ``user`` (the process itself, so that killing it leaves nothing behind)."""
    return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, user=user, group="users", cwd="/")


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A venv under /opt owned by an ordinary user, with a module and a .pth that leaves a marker file."""
    root = Path(tempfile.mkdtemp(prefix="tp-planted-", dir="/opt"))
    marker = tmp_path / "the-pth-ran"
    tmp_path.chmod(0o777)
    try:
        yield root, marker
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_venv_another_user_owns_is_never_run_not_even_to_check_it(
    sshd: SshServer, planted: tuple[Path, Path]
) -> None:
    root, marker = planted
    site = make_venv(root / "venv", "tp_planted")
    (site / "zz-planted.pth").write_text(f"import os; open({str(marker)!r}, 'w').close()\n")
    subprocess.run(["chown", "-R", f"{sshd.setup.users['fish']}:users", str(root / "venv")], check=True)
    result = run(sshd.target("root"), "pass\n", need=["tp_planted"])
    assert isinstance(result.error, InterpreterNotFoundError), result.error
    assert str(root) not in str(result.error)
    assert not marker.exists()


def test_a_venv_others_can_write_to_is_skipped(sshd: SshServer) -> None:
    user = sshd.setup.users["fish"]
    venv = sshd.setup.home("fish") / "w-venv"
    site = make_venv(venv, "tp_fish_w", owner=user)
    try:
        site.chmod(0o777)
        refused = run(sshd.target("fish"), "pass\n", need=["tp_fish_w"])
        assert isinstance(refused.error, InterpreterNotFoundError), refused.error
        assert str(venv) not in str(refused.error)
        site.chmod(0o755)
        found = run(
            sshd.target("fish"), "import sys\ndef main():\n    return sys.prefix\n", need=["tp_fish_w"]
        )
        assert found.result == str(venv), found.error
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def test_other_users_running_pythons_are_not_candidates(sshd: SshServer) -> None:
    """A zsh user's Python (from its venv) and a root Python with numpy run; the dash user finds neither."""
    zsh_venv = sshd.setup.home("zsh") / "r-venv"
    make_venv(zsh_venv, "tp_zsh_running", owner=sshd.setup.users["zsh"])
    # each time.sleep here: a process that stays up until the test kills it, not a wait
    others = [
        as_user(sshd.setup.users["zsh"], str(zsh_venv / "bin" / "python"), "-c", STAYS_ALIVE),
        subprocess.Popen([sys.executable, "-c", "import numpy, time; time.sleep(60)"]),  # root, with numpy
    ]
    try:
        for need in ("tp_zsh_running", "numpy"):
            result = run(sshd.target("dash"), "pass\n", need=[need])
            assert isinstance(result.error, InterpreterNotFoundError), (need, result.error)
            assert str(zsh_venv) not in str(result.error)
            assert sys.executable not in str(result.error)
    finally:
        for proc in others:
            proc.kill()
            proc.wait()
        shutil.rmtree(zsh_venv, ignore_errors=True)


def test_the_login_users_own_running_python_is_still_found(sshd: SshServer) -> None:
    user = sshd.setup.users["tcsh"]
    venv = Path(tempfile.mkdtemp(prefix="tp-own-running-"))
    venv.chmod(0o755)
    make_venv(venv / "v", "tp_tcsh_running", owner=user)
    # time.sleep here: a process that stays up until the test kills it, not a wait
    proc = as_user(user, str(venv / "v" / "bin" / "python"), "-c", STAYS_ALIVE)
    try:
        script = "import sys\ndef main():\n    return sys.executable\n"
        result = run(sshd.target("tcsh"), script, need=["tp_tcsh_running"])
        assert result.result == str(venv / "v" / "bin" / "python"), result.error
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(venv, ignore_errors=True)


def test_discovery_checks_each_part_of_a_venv() -> None:
    from trainprobe.remote import _discovery

    venv = Path(tempfile.mkdtemp(prefix="tp-trust-"))
    try:
        site = make_venv(venv / "v", "tp_trust")
        python = str(venv / "v" / "bin" / "python")
        assert _discovery.trusted_env(str(venv / "v"), python)
        for part in (venv / "v", venv / "v" / "bin", site, venv / "v" / "pyvenv.cfg"):
            mode = part.stat().st_mode
            part.chmod(mode | 0o002)
            assert not _discovery.trusted_env(str(venv / "v"), python), part
            part.chmod(mode)
        os.chown(site, 12345, -1)
        assert not _discovery.trusted_env(str(venv / "v"), python)
    finally:
        shutil.rmtree(venv, ignore_errors=True)
