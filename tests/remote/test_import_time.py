"""What a plain ``trainprobe run`` imports, on both sides: the start-up work the engine saves stays saved.

Every run starts a local Python process and at least one far-side interpreter, so a module imported on that
path is paid on every run: ``dataclasses`` (it imports ``inspect``) costs about 10 ms, ``typer`` (gone from
the CLI) and ``rich`` about 100 ms, next to ~45 ms for a whole run over a reused ssh connection
(docs/remote.md, Benchmark). These tests name the modules, not times: a timing assertion would fail on a
busy machine and pass a slow change. The run goes through ``trainprobe.cli.main``, the one path every
``trainprobe run`` takes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: never needed to run one script on one target, and each costs milliseconds (or, for the first three, 100)
LOCAL_HEAVY = ("typer", "rich", "numpy", "dataclasses", "inspect", "tomllib")
#: what the far side (stage 1 and the agent) must not add to the interpreter for a script without main()
FAR_HEAVY = ("typing", "dataclasses", "inspect", "ast")

REPORT_MODULES = """\
import json, sys
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No targets file anywhere (the common case), runs kept under tmp_path."""
    monkeypatch.delenv("TRAINPROBE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path


def local_modules_after_run(script: Path) -> set[str]:
    """The modules a fresh process holds after ``trainprobe run local SCRIPT -q`` (the CLI's one path)."""
    code = (
        "import json, sys; from trainprobe.cli import main; "
        f"rc = main(['run', 'local', {str(script)!r}, '-q']); "
        "print(json.dumps([rc, sorted(sys.modules)]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, modules = json.loads(proc.stdout.splitlines()[-1])
    assert rc == 0, proc.stderr
    return set(modules)


def test_a_single_run_imports_nothing_heavy_locally(env: Path) -> None:
    script = env / "noop.py"
    script.write_text("pass\n")
    modules = local_modules_after_run(script)
    assert "trainprobe.remote.session" in modules  # it did run through the engine
    assert sorted(set(LOCAL_HEAVY) & modules) == []


def test_the_far_side_adds_nothing_heavy_to_the_script_process(env: Path) -> None:
    from trainprobe import remote

    script = env / "modules.py"
    script.write_text(REPORT_MODULES)
    result = remote.run(f"local//python={sys.executable}", script, stdout=None)
    result.raise_for_error()
    with_agent = set(json.loads((result.stdout_path or Path()).read_text()))
    bare = subprocess.run(
        [sys.executable, "-c", REPORT_MODULES], capture_output=True, text=True, check=True
    ).stdout
    added = with_agent - set(json.loads(bare))
    assert "select" in added  # the agent did run in this interpreter (it waits on select, a built-in)
    assert sorted(set(FAR_HEAVY) & added) == []
