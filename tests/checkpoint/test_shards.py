"""The report algebra of a unit scanned on several machines (checkpoint/sharded/), with no remote run:
each "target" is a directory this test changes into, holding what a node-local disk would hold. The merged
report equals a scan of all the files in one place — for real DCP (4 ranks, FSDP2), DeepSpeed ZeRO-2 and HF
sharded checkpoints — with the NaN named by tensor and rank file, a missing file named, a file two targets
see read once, a conflicting copy and a failed target reported."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fixtures.frameworks import damage
from fixtures.frameworks.node_local import spread_over_nodes
from trainprobe.checkpoint import scan
from trainprobe.checkpoint.sharded.inventory import inventory
from trainprobe.checkpoint.sharded.merge import ShardedScan, merge_shards
from trainprobe.checkpoint.sharded.plan import plan_shards
from trainprobe.checkpoint.sharded.scan_share import scan_share
from trainprobe.errors import UsageError

pytest.importorskip("torch")


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def sharded_scan(nodes: list[Path], name: str, *, fail: set[str] = frozenset()) -> ShardedScan:  # type: ignore[assignment]
    """What the fleet run does, each target a directory: inventories, the plan, the shares, the merge."""
    inventories = {}
    for k, node in enumerate(nodes):
        with inside(node):
            inventories[f"t{k}"] = json.loads(json.dumps(inventory(name)))  # as it travels
    plan = plan_shards(name, inventories)
    results, failed = {}, {}
    for k, node in enumerate(nodes):
        target = f"t{k}"
        if target in plan.requests:
            if target in fail:
                failed[target] = "unreachable (a test)"
                continue
            with inside(node):
                results[target] = json.loads(json.dumps(scan_share(name, plan.requests[target])))
    return merge_shards(plan, results, failed)


def local_scan(folder: Path, name: str) -> dict[str, Any]:
    with inside(folder):
        return scan([name]).to_json()


def without_timings(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc.pop("sharded", None)
    doc["totals"].pop("seconds")
    for f in doc["files"]:
        f["totals"].pop("seconds")
    return doc


def spread(source: Path, tmp_path: Path, nodes: int, drop: str | None = None) -> tuple[list[Path], Path]:
    """``source`` spread over ``nodes`` node-local directories by writer rank, and gathered in one place;
    ``drop``: a file removed everywhere."""
    dirs = [tmp_path / f"node{k}" for k in range(nodes)]
    spread_over_nodes(source, dirs, ranks_per_node=1)
    gathered = tmp_path / "gathered"
    shutil.copytree(source, gathered / source.name)
    if drop:
        for d in (*dirs, gathered):
            (d / source.name / drop).unlink(missing_ok=True)
    return dirs, gathered


def test_a_dcp_checkpoint_of_4_ranks_on_4_nodes_is_one_report(framework_units: Any, tmp_path: Path) -> None:
    hurt = damage.nan_in_exp_avg_sq(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path / "src", rank=2)
    nodes, gathered = spread(hurt.root, tmp_path, 4, drop="__3_0.distcp")
    merged = sharded_scan(nodes, "step_3")
    assert without_timings(merged.to_json()) == without_timings(local_scan(gathered, "step_3"))
    (unit,) = merged.report.units
    (part,) = unit.files
    (bad,) = part.bad_tensors
    assert bad.name == "optimizer.state.0.weight.exp_avg_sq@8,0"
    assert bad.file == "step_3/__2_0.distcp"
    assert part.error == "data file __3_0.distcp (holding optimizer.param_groups.0.eps) is missing"
    assert merged.plan.missing == {"step_3": ["__3_0.distcp"]}
    assert merged.plan.reader == {f"__{r}_0.distcp": f"t{r}" for r in range(3)}
    assert merged.exit_code == 1


def test_deepspeed_partitions_on_two_nodes_and_one_missing(framework_units: Any, tmp_path: Path) -> None:
    source = framework_units.path("deepspeed/zero2/global_step4")
    nodes, gathered = spread(source, tmp_path / "whole", 2)
    merged = sharded_scan(nodes, "global_step4")
    assert without_timings(merged.to_json()) == without_timings(local_scan(gathered, "global_step4"))
    assert merged.report.units[0].verdict == "clean"
    assert merged.plan.reader["zero_pp_rank_1_mp_rank_00_optim_states.pt"] == "t1"
    gone = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    nodes, gathered = spread(source, tmp_path / "less", 2, drop=gone)
    merged = sharded_scan(nodes, "global_step4")
    assert without_timings(merged.to_json()) == without_timings(local_scan(gathered, "global_step4"))
    (zero,) = [e for e in merged.report.units[0].evidence if e.check == "zero-partitions"]
    assert zero.outcome == "fail"
    assert gone in zero.message


def test_a_file_two_targets_see_is_read_once_and_shards_split_by_size(
    framework_units: Any, tmp_path: Path
) -> None:
    source = framework_units.path("hf-trainer/sharded")
    nodes = [tmp_path / "node0" / source.name, tmp_path / "node1" / source.name]
    for node in nodes:
        node.mkdir(parents=True)
    shards = sorted(p.name for p in source.glob("*.safetensors"))
    for i, f in enumerate(sorted(p.name for p in source.iterdir())):
        owner = nodes[i % 2] if f in shards else nodes[0]
        shutil.copy2(source / f, owner / f)
    os.link(nodes[1] / shards[1], nodes[0] / shards[1])  # the same inode, seen by both: shared storage
    merged = sharded_scan([n.parent for n in nodes], source.name)
    gathered = tmp_path / "gathered"
    shutil.copytree(source, gathered / source.name)
    assert without_timings(merged.to_json()) == without_timings(local_scan(gathered, source.name))
    assert [h.target for h in merged.plan.holders[shards[1]]] == ["t0", "t1"]
    readers = {rel: merged.plan.reader[rel] for rel in shards}
    assert len(readers) == len(shards)  # each shard read once
    assert sorted(set(readers.values())) == ["t0", "t1"]  # split over both


def test_same_name_different_file_is_a_conflict(framework_units: Any, tmp_path: Path) -> None:
    source = framework_units.path("deepspeed/zero2/global_step4")
    older = framework_units.path("deepspeed/zero2/global_step2")
    nodes, _ = spread(source, tmp_path, 2)
    stale = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    shutil.copy2(older / stale, nodes[0] / "global_step4" / stale)  # node 0 keeps another save's partition
    merged = sharded_scan(nodes, "global_step4")
    (conflict,) = merged.plan.conflicts
    assert stale in conflict
    assert "read the newer, t1's" in conflict
    assert merged.report.units[0].verdict == "corrupt"
    assert any(e.check == "sharded-conflict" for e in merged.report.units[0].evidence)


def test_a_failed_target_has_its_files_reported_not_read(framework_units: Any, tmp_path: Path) -> None:
    nodes, _ = spread(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path, 4)
    merged = sharded_scan(nodes, "step_3", fail={"t1"})
    (part,) = merged.report.units[0].files
    assert part.error is not None
    assert "not read: __1_0.distcp" in part.error
    assert "unreachable (a test)" in part.error
    assert part.tensors  # the other three ranks' tensors are still reported
    assert merged.exit_code == 1
    assert merged.to_json()["sharded"]["failed"] == {"t1": "unreachable (a test)"}


def test_files_that_make_no_unit_are_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "n0" / "x").mkdir(parents=True)
    (tmp_path / "n0" / "x" / "notes.txt").write_text("hello")
    with inside(tmp_path / "n0"):
        inventories = {"t0": inventory("x")}
    with pytest.raises(UsageError, match="make no checkpoint unit"):
        plan_shards("x", inventories)
