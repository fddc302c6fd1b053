"""When two targets of ``--sharded`` hold a file of one name, whether it is one file (or copies of it) or two
different files: decided by its bytes, never by where it lies or when it was copied. Real inventories of
real files (``sharded.inventory``), as each target sends them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from trainprobe.checkpoint.sharded.inventory import inventory
from trainprobe.checkpoint.sharded.plan import plan_shards


def _as_another_host(inv: dict[str, Any], *, mtime_shift_ns: int = 0) -> dict[str, Any]:
    """The same files seen from another machine: another boot, device and inode, mtimes maybe shifted."""
    other = copy.deepcopy(inv)
    other["boot"] = "another-boot"
    for e in other["files"]:
        e["dev"], e["ino"] = e["dev"] + 1, e["ino"] + 1
        e["mtime_ns"] += mtime_shift_ns
    return other


def _sharded_dir(root: Path) -> Path:
    folder = root / "model"
    folder.mkdir()
    index = {"metadata": {"total_size": 16}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    header = b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}'
    data = len(header).to_bytes(8, "little") + header + b"\0" * 16
    (folder / "model-00001-of-00001.safetensors").write_bytes(data)
    return folder


def test_a_copied_index_with_the_same_bytes_is_no_conflict(tmp_path: Path) -> None:
    folder = _sharded_dir(tmp_path)
    mine = inventory(str(folder))
    for shift in (0, 1_000, 3_000_000_000):  # the same mtime, rounded, or a copy that did not keep it
        plan = plan_shards(str(folder), {"A": mine, "B": _as_another_host(mine, mtime_shift_ns=shift)})
        assert plan.conflicts == [], plan.conflicts


def test_an_index_with_other_bytes_is_a_conflict(tmp_path: Path) -> None:
    folder = _sharded_dir(tmp_path)
    mine = inventory(str(folder))
    index = folder / "model.safetensors.index.json"
    index.write_text(index.read_text().replace("16", "17"))
    theirs = _as_another_host(inventory(str(folder)))
    plan = plan_shards(str(folder), {"A": mine, "B": theirs})
    assert any("model.safetensors.index.json" in c and "different files" in c for c in plan.conflicts)
