"""Shared pytest configuration.

Fixtures for real components live in tests/fixtures/, registered here so any test directory can use them:
``sshd`` and ``ssh_setup`` (a real OpenSSH server on loopback with bash/zsh/fish/dash/tcsh users) and
``numpy_venv`` (a system-Python venv with numpy and without trainprobe), ``framework_units`` (checkpoints
written by the real frameworks, cached per framework versions: tests/fixtures/frameworks/plugin.py).

``--load N`` runs N busy processes per core for the whole session (a machine that also runs other work);
.ci/run runs the ``timing`` tests (the slow, timing-sensitive ones: :data:`TIMING_TESTS` and the tests marked
in place) under ``--load 1`` after the normal suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["fixtures.sshd", "fixtures.venvs", "fixtures.frameworks.plugin"]

#: tests of other directories that are timing-sensitive (marked ``timing`` here, so that their files stay
#: as they are): node id prefixes, relative to tests/. The remote engine's mark theirs in place.
TIMING_TESTS = (
    "cli/test_scan_demo.py",  # the demo's story
    "demo/",
    "cli/test_watch.py",
    "tasks/test_watch_on.py",
    "cli/test_triage_cli.py::test_html_report_renders_in_headless_chromium",
)

#: one busy process: spins until killed, or until its parent (this pytest) is gone, so that even a pytest
#: killed with SIGKILL leaves none behind
_HOG = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200000):
        pass
"""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="run N busy processes per CPU core for the whole session (tests must hold on a busy machine)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        nodeid = item.nodeid.removeprefix("tests/")
        if nodeid.startswith(TIMING_TESTS):
            item.add_marker(pytest.mark.timing)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@pytest.fixture(scope="session", autouse=True)
def cpu_load(request: pytest.FixtureRequest) -> Iterator[int]:
    """``--load N``: N busy processes on every core, from the first test to the end of the session (killed
    then, whatever the outcome). Yields how many run."""
    per_core = int(request.config.getoption("load"))
    if per_core < 0:
        raise pytest.UsageError("--load takes a number of busy processes per core (0 or more)")
    hogs = [
        subprocess.Popen(
            [sys.executable, "-c", _HOG, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the session does not hit them; the finally below does
        )
        for _ in range(per_core * _cores())
    ]
    try:
        yield len(hogs)
    finally:
        for hog in hogs:
            if hog.poll() is None:
                hog.send_signal(signal.SIGKILL)
        for hog in hogs:
            hog.wait()


DEEP_LEVELS = 1100  # past Python's default recursion limit (1000): a recursive walk would fail on it


@pytest.fixture
def deep_tree(tmp_path: Path) -> Iterator[Path]:
    """A directory ``DEEP_LEVELS`` levels below ``tmp_path`` (each level named ``d``), removed afterwards.

    Built and removed one level at a time: pathlib's and os.makedirs's mkdir recurse, and so does pytest's
    own clean-up (shutil.rmtree), so a tree left behind fails a later session's clean-up (a RecursionError
    inside pytest, reported as an unclosed scandir iterator)."""
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(DEEP_LEVELS):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    deepest = tmp_path.joinpath(*["d"] * DEEP_LEVELS)
    yield deepest
    _remove_bottom_up(tmp_path / "d")


def _remove_bottom_up(top: Path) -> None:
    levels: list[str] = []
    here = str(top)
    while os.path.isdir(here):
        levels.append(here)
        with os.scandir(here) as entries:
            inner = ""
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    inner = entry.path
                else:
                    os.unlink(entry.path)
        if not inner:
            break
        here = inner
    for level in reversed(levels):
        os.rmdir(level)


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT and SIGQUIT at their defaults, as in a terminal's foreground job. A suite started in the
    background of a non-interactive shell (``bash .ci/run &``, ``make test &`` in a script) inherits both
    ignored (POSIX: asynchronous commands without job control ignore them), and so does every child it starts:
    ``watch`` and ``run`` then never see the Ctrl-C a test sends, and those tests wait out their deadlines."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def sigint_restored() -> Iterator[None]:
    """Each test ends with this process's SIGINT handler as it found it: a test that installs its own (the
    library's watch loop, a KeyboardInterrupt test) leaves no handler behind for later tests' children."""
    before = signal.getsignal(signal.SIGINT)
    yield
    if before is not None:  # set again whatever getsignal says: a library's C code can change it unseen
        signal.signal(signal.SIGINT, before)
