"""What each command line imports, in a fresh process: the lean start stays lean.

An agent calls the CLI dozens of times per diagnosis and pays every import each time: numpy ~150 ms, rich
~60 ms, typer ~60 ms (with pydantic), next to ~10 ms for ``python -c pass``. These tests name the modules a
command must not import, not times (a timed test fails on a busy machine and passes a slow change); the
figures are in ``benchmarks/scan.py``.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from trainprobe.cli import COMMANDS

#: runs the command line like the ``trainprobe`` script does, then lists sys.modules (without importing
#: anything more: no json)
DRIVER = (
    "import os, sys\n"
    "from trainprobe.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "with open(os.environ['TP_MODULES'], 'w') as out:\n"
    "    out.write('\\n'.join(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)

NEVER = ("typer", "pydantic", "click", "torch", "matplotlib")
#: the remote engine: every module under trainprobe.remote but its face (lazy: it imports nothing) and the hop
#: registry (trainprobe.remote.hops: the target help is built from its rows, without a hop module)
REMOTE_ENGINE = "trainprobe.remote.*"
LIBRARIES = ("trainprobe.checkpoint", "trainprobe.metrics", REMOTE_ENGINE, "trainprobe.triage")
#: what test_import_time.py guards for a single run, checked here through the whole program too
RUN_HEAVY = ("rich", "numpy", "dataclasses", "inspect", "tomllib")


#: a command that reuses another's rendering imports that module too (it is light: no library at import)
SHARES = {"watch": ("logs",), "demo": ("triage",)}


def command_modules(*but: str) -> tuple[str, ...]:
    """The command modules other than ``but`` and what they share."""
    allowed = {*but, *(shared for name in but for shared in SHARES.get(name, ()))}
    return tuple(f"trainprobe.cli.{name}" for name in COMMANDS if name not in allowed)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small safetensors file, a JSONL log, a script, a run directory with both."""
    root = tmp_path_factory.mktemp("budget")
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    tensor = len(header).to_bytes(8, "little") + header + b"\x00\x00\x80\x3f\x00\x00\xc0\x7f"  # 1.0, NaN
    (root / "small.safetensors").write_bytes(tensor)
    (root / "clean.safetensors").write_bytes(tensor[:-4] + b"\x00\x00\x80\x3f")
    rows = "".join(f'{{"step": {s}, "loss": {6.0 if s == 130 else 1.0}}}\n' for s in range(200))
    (root / "train.jsonl").write_text(rows)
    (root / "noop.py").write_text("pass\n")
    (root / "run").mkdir()
    (root / "run" / "train.jsonl").write_text(rows)
    (root / "run" / "step_100.safetensors").write_bytes(tensor)
    return root


def imported(args: list[str], cwd: Path, *, tty: bool = False) -> tuple[int, str, set[str]]:
    """(exit code, stdout, modules) of the command line in a fresh interpreter; stdout a pipe or a tty."""
    listing = cwd / "modules.txt"
    env = {
        **os.environ,
        "TP_MODULES": str(listing),
        "TRAINPROBE_RUNS_DIR": str(cwd / "runs"),
        "XDG_CONFIG_HOME": str(cwd / "config"),
    }
    env.pop("TRAINPROBE_CONFIG", None)
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm"
    if not tty:
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=120,
        )
        return proc.returncode, proc.stdout, set(listing.read_text().split("\n"))
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *args],
        stdout=secondary,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    code = proc.wait(120)
    return code, b"".join(chunks).decode(), set(listing.read_text().split("\n"))


CASES = [
    (
        ["--version"],
        (*NEVER, "rich", "numpy", "argparse", "typing", "re", "json", *LIBRARIES, *command_modules()),
    ),
    (["--help"], (*NEVER, "rich", "numpy", *LIBRARIES, *command_modules())),
    *(([name, "--help"], (*NEVER, "rich", "numpy", *LIBRARIES, *command_modules(name))) for name in COMMANDS),
    (["nosuch"], (*NEVER, "rich", "numpy", "argparse", *LIBRARIES)),
    (["scan", "--bogus"], (*NEVER, "rich", "numpy", *LIBRARIES)),
    (["scan", "small.safetensors", "--timeout", "nan"], (*NEVER, "rich", "numpy", *LIBRARIES)),
    (["logs", "train.jsonl", "--window", "2"], (*NEVER, "rich", "numpy", *LIBRARIES)),
    (["watch", "train.jsonl", "--interval", "0"], (*NEVER, "rich", "numpy", *LIBRARIES)),
    (["run", "local", "missing.py"], (*NEVER, *RUN_HEAVY)),
    (["scan", "small.safetensors"], (*NEVER, "rich", *command_modules("scan"))),
    (["scan", "--json", "small.safetensors"], (*NEVER, "rich")),
    (["check", "small.safetensors"], (*NEVER, "rich")),
    (["diff", "small.safetensors", "clean.safetensors"], (*NEVER, "rich")),
    (["logs", "train.jsonl", "--json"], (*NEVER, "rich")),
    (["logs", "train.jsonl"], (*NEVER, "rich")),
    (["triage", "run", "--json"], (*NEVER, "rich")),
    (["run", "local", "noop.py"], (*NEVER, *RUN_HEAVY, *command_modules("run"))),
    (["run", "--on", "local", "--on", "local//cd=/", "noop.py"], (*NEVER, "rich", "numpy", "tomllib")),
]


@pytest.mark.parametrize(("args", "forbidden"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_command_imports_only_what_it_needs(
    files: Path, args: list[str], forbidden: tuple[str, ...]
) -> None:
    code, _, modules = imported(args, files)
    assert code in (0, 1, 2)
    assert sorted(set(forbidden) & modules) == []
    if REMOTE_ENGINE in forbidden:
        assert sorted(engine_modules(modules)) == []


def engine_modules(modules: set[str]) -> set[str]:
    """The modules of :data:`REMOTE_ENGINE` among ``modules``."""
    return {m for m in modules if m.startswith("trainprobe.remote.") and m != "trainprobe.remote.hops"}


def test_help_shows_every_hop_kind_without_the_engine(files: Path) -> None:
    from trainprobe.remote.hops import HOP_KINDS

    code, out, modules = imported(["run", "--help"], files)
    assert code == 0
    usages = [line.split()[0] for line in out.split("outermost first:\n", 1)[1].split("\n\n")[0].splitlines()]
    assert [usage.split("=")[0].split("[")[0] for usage in usages[: len(HOP_KINDS)]] == list(HOP_KINDS)
    assert "trainprobe.remote.hops" in modules  # the rows came from the registry
    assert sorted(engine_modules(modules)) == []


def test_the_chosen_command_is_imported_and_no_other(files: Path) -> None:
    _, _, modules = imported(["diff", "small.safetensors", "clean.safetensors"], files)
    assert "trainprobe.cli.diff" in modules
    assert sorted(set(command_modules("diff")) & modules) == []


def test_on_a_terminal_markup_is_styled_without_rich_and_tables_are_drawn_by_it(files: Path) -> None:
    code, out, modules = imported(["scan", "small.safetensors"], files, tty=True)
    assert code == 1
    assert "\x1b[1;31m✗ NON-FINITE\x1b[0m" in out
    assert "rich" not in modules  # no table: plain markup needs no rich
    code, out, modules = imported(["logs", "train.jsonl"], files, tty=True)
    assert code == 1
    assert "rich" in modules
    assert "┏━━━━━━━━━━┳" in out  # rich's box, fitted to the terminal
    assert "\x1b[1mseverity\x1b[0m" in out
