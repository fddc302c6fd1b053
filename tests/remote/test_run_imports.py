"""``remote.run`` is the one fast path of a run: what it imports on both sides, by module name (no timings).

Every run starts a local Python process and at least one far-side interpreter, so a module imported on that
path is paid on every run (``typing`` and ``dataclasses``/``inspect`` a few milliseconds each locally; on the
far side ``re``, which ``base64``, ``json`` and ``linecache`` pull in, about 6 ms, ``signal`` with ``enum``
about 4). The CLI's own budget is tests/remote/test_import_time.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: never needed to run one script on one target through the library
LOCAL_HEAVY = (
    "typing",
    "dataclasses",
    "inspect",
    "tomllib",
    "numpy",
    "typer",
    "rich",
    "trainprobe.checkpoint",
)
#: what the far side (stage 1 and the agent) must not add to the script's interpreter for a script without
#: main(): each is a millisecond or more of every run
FAR_HEAVY = ("typing", "dataclasses", "inspect", "ast", "re", "json", "base64", "signal", "enum", "selectors",
             "linecache", "tokenize", "contextlib", "subprocess")  # fmt: skip

REPORT_MODULES = "import sys\nprint(','.join(sorted(sys.modules)))\n"


def test_a_run_through_the_library_imports_nothing_heavy_locally(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from trainprobe.remote.fleet import expand_targets, load_config\n"
        "from trainprobe import remote\n"
        f"[target] = expand_targets(['local//python={sys.executable}'], load_config())\n"
        "result = remote.run(target, 'pass\\n')\n"
        "assert result.ok, result.error\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {
        "TRAINPROBE_RUNS_DIR": str(tmp_path / "runs"),
        "XDG_CONFIG_HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    modules = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "trainprobe.remote.session" in modules  # it did run through the engine
    assert sorted(set(LOCAL_HEAVY) & modules) == []


def test_the_far_side_adds_only_builtins_to_the_script_process(tmp_path: Path) -> None:
    from trainprobe import remote

    result = remote.run(f"local//python={sys.executable}", REPORT_MODULES)
    result.raise_for_error()
    with_agent = set((result.stdout_path or Path()).read_text().strip().split(","))
    bare = subprocess.run([sys.executable, "-c", REPORT_MODULES], capture_output=True, text=True, check=True)
    added = with_agent - set(bare.stdout.strip().split(","))
    assert "select" in added  # the agent did run in this interpreter
    assert sorted(set(FAR_HEAVY) & added) == []
