"""The engine knows no capability: ``trainprobe.remote`` imports no other trainprobe package but
``trainprobe.errors`` (what runs a capability's function remotely lives in ``trainprobe.tasks``)."""

from __future__ import annotations

import ast
from pathlib import Path

import trainprobe.remote

REMOTE = Path(trainprobe.remote.__file__).parent
ALLOWED = ("trainprobe.remote", "trainprobe.errors")


def imported_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_bytes(), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names if node.module == "trainprobe"]
    return names


def test_remote_imports_no_capability_package() -> None:
    files = sorted(REMOTE.rglob("*.py"))
    assert len(files) > 20
    outside = {
        f"{path.relative_to(REMOTE)}: {name}"
        for path in files
        for name in imported_names(path)
        if (name == "trainprobe" or name.startswith("trainprobe."))
        and not any(name == ok or name.startswith(ok + ".") for ok in ALLOWED)
        and name != "trainprobe"
    }
    assert sorted(outside) == []


def test_the_check_sees_an_import_of_a_capability(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from trainprobe.checkpoint.scan import scan\n    import trainprobe.metrics\n"
    )
    assert imported_names(module) == ["trainprobe.checkpoint.scan", "trainprobe.metrics"]
