"""``check`` of a unit whose files are on several machines (checkpoint/check/share.py, sharded.py), with no
remote run: each "target" is a directory this test changes into, holding what a node-local disk would hold.
Parts each target reads whole give exactly the check of all the files in one place (DeepSpeed ZeRO-2, clean
and with a stale optimizer partition: torn; a DCP directory that one target sees whole); a DCP directory
spread over four nodes gives what can be judged in shares exactly (NaN/Inf, coverage, the missing file) and
names the checks that relate its data files as not made."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fixtures.frameworks import damage
from fixtures.frameworks.node_local import spread_over_nodes
from trainprobe.checkpoint.check import check_paths
from trainprobe.checkpoint.sharded.check_share import check_share
from trainprobe.checkpoint.sharded.inventory import inventory
from trainprobe.checkpoint.sharded.merge import ShardedCheck, merge_check_shards
from trainprobe.checkpoint.sharded.plan import plan_shards

pytest.importorskip("torch")


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def sharded_check(
    nodes: list[Path],
    name: str,
    *,
    fail: set[str] = frozenset(),  # type: ignore[assignment]
    edit: Callable[[str, dict[str, Any]], None] | None = None,
) -> ShardedCheck:
    """What the fleet run does, each target a directory: inventories, the plan, the shares, the merge
    (``edit``: changes a target's answer on its way, as another save's file would)."""
    inventories = {}
    for k, node in enumerate(nodes):
        with inside(node):
            inventories[f"t{k}"] = json.loads(json.dumps(inventory(name)))  # as it travels
    plan = plan_shards(name, inventories, whole=True)
    results, failed = {}, {}
    for target, requests in plan.requests.items():
        if target in fail:
            failed[target] = "unreachable (a test)"
            continue
        with inside(nodes[int(target[1:])]):
            results[target] = json.loads(json.dumps(check_share(name, requests)))
        if edit is not None:
            edit(target, results[target])
    return merge_check_shards(plan, results, failed)


def local_check(folder: Path, name: str) -> dict[str, Any]:
    with inside(folder):
        return check_paths([name]).to_json()


def spread(
    source: Path, tmp_path: Path, nodes: int, drop: str | None = None, ranks_per_node: int = 1
) -> tuple[list[Path], Path]:
    """``source`` spread over ``nodes`` node-local directories by writer rank, and gathered in one place;
    ``drop``: a file removed everywhere."""
    dirs = [tmp_path / f"node{k}" for k in range(nodes)]
    spread_over_nodes(source, dirs, ranks_per_node=ranks_per_node)
    gathered = tmp_path / "gathered"
    shutil.copytree(source, gathered / source.name)
    if drop:
        for d in (*dirs, gathered):
            (d / source.name / drop).unlink(missing_ok=True)
    return dirs, gathered


def report_of(sharded: ShardedCheck) -> dict[str, Any]:
    doc = json.loads(json.dumps(sharded.to_json()))
    doc.pop("sharded")
    return doc


def test_deepspeed_partitions_on_two_nodes_are_checked_as_in_one_place(
    framework_units: Any, tmp_path: Path
) -> None:
    source = framework_units.path("deepspeed/zero2/global_step4")
    nodes, gathered = spread(source, tmp_path, 2)
    merged = sharded_check(nodes, "global_step4")
    assert report_of(merged) == local_check(gathered, "global_step4")
    (result,) = merged.report.results
    assert result.verdict == "consistent"
    assert {e.check for e in result.evidence} >= {"adam-bound", "zero-partitions", "step-counters"}
    assert merged.plan.reader["zero_pp_rank_1_mp_rank_00_optim_states.pt"] == "t1"
    assert merged.exit_code == 0


def test_a_stale_partition_on_another_node_is_torn_as_in_one_place(
    framework_units: Any, tmp_path: Path
) -> None:
    zero2 = framework_units.path("deepspeed/zero2")
    torn = damage.stale_optimizer(zero2 / "global_step4", zero2 / "global_step2", tmp_path / "src")
    nodes, gathered = spread(torn.root, tmp_path, 2)
    merged = sharded_check(nodes, "global_step4")
    assert report_of(merged) == local_check(gathered, "global_step4")
    (result,) = merged.report.results
    assert result.verdict == "torn"
    counters = [e for e in result.evidence if e.check == "step-counters" and e.failed]
    assert counters
    assert {e.file for e in counters} == {
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    }
    assert merged.exit_code == 1


def test_a_dcp_directory_one_target_sees_whole_goes_whole_to_it(framework_units: Any, tmp_path: Path) -> None:
    source = framework_units.path("dcp/fsdp2-4ranks/step_3")
    nodes, gathered = spread(source, tmp_path, 2, ranks_per_node=2)
    for f in source.iterdir():  # node 1 sees the whole directory (shared storage), node 0 ranks 0 and 1
        seen = nodes[1] / source.name / f.name
        if not seen.exists():
            os.link(nodes[0] / source.name / f.name, seen)
    merged = sharded_check(nodes, "step_3")
    assert set(merged.plan.reader.values()) == {"t1"}
    assert report_of(merged) == local_check(gathered, "step_3")
    assert merged.report.results[0].verdict == "consistent"


def test_a_dcp_directory_on_4_nodes_is_judged_where_shares_can_say(
    framework_units: Any, tmp_path: Path
) -> None:
    hurt = damage.nan_in_exp_avg_sq(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path / "src", rank=2)
    nodes, gathered = spread(hurt.root, tmp_path, 4, drop="__3_0.distcp")
    merged = sharded_check(nodes, "step_3")
    whole = local_check(gathered, "step_3")["units"][0]
    (result,) = report_of(merged)["units"]
    assert result["verdict"] == whole["verdict"] == "nonfinite"
    assert result["nonfinite"] == whole["nonfinite"]
    assert result["nonfinite"][0]["name"] == "optimizer.state.0.weight.exp_avg_sq@8,0"
    for key in ("step", "step_source", "step_sources", "tensors", "bytes", "files", "notes"):
        assert result[key] == whole[key], key
    by_check = {e["check"]: e for e in whole["evidence"]}
    for check in ("dcp-coverage", "non-finite", "step-sources"):
        assert [e for e in result["evidence"] if e["check"] == check] == [by_check[check]]
    missing = [e for e in result["evidence"] if e["check"] == "container" and e["outcome"] == "fail"]
    assert [e["message"] for e in missing] == [
        "data file __3_0.distcp (holding optimizer.param_groups.0.eps) is missing"
    ]
    (skipped,) = [e for e in result["evidence"] if e["check"] == "sharded"]
    assert skipped["outcome"] == "skip"
    assert "t0, t1, t2" in skipped["message"]
    assert "Adam" in skipped["message"]
    assert not any(e["check"] == "adam-bound" for e in result["evidence"])  # not guessed


def test_a_clean_dcp_directory_on_4_nodes_is_unknown_not_consistent(
    framework_units: Any, tmp_path: Path
) -> None:
    nodes, gathered = spread(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path, 4)
    merged = sharded_check(nodes, "step_3")
    (result,) = merged.report.results
    assert local_check(gathered, "step_3")["units"][0]["verdict"] == "consistent"
    assert result.verdict == "unknown"  # what shares cannot judge is not judged healthy
    assert "read in shares" in result.reason
    assert merged.exit_code == 0
    assert merged.report.exit_code_for(strict=True) == 1


def test_step_counters_that_disagree_across_shares_are_torn(framework_units: Any, tmp_path: Path) -> None:
    nodes, _ = spread(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path, 4)

    def behind(target: str, answer: dict[str, Any]) -> None:
        """Rank 1's file as an earlier save wrote it: its step counters say 2."""
        if target == "t1":
            for check in answer["checks"]:
                for label, rows in check["facts"]["counters"].items():
                    check["facts"]["counters"][label] = [[2.0, params] for _value, params in rows]

    counters = sharded_check(nodes, "step_3").report.results[0].step_sources
    assert any(s["source"] == "optimizer counters" for s in counters)  # all agree when nothing is edited
    merged = sharded_check(nodes, "step_3", edit=behind)
    (result,) = merged.report.results
    assert result.verdict == "torn"
    (torn,) = [e for e in result.evidence if e.check == "step-counters" and e.failed]
    assert "per-parameter step counters disagree" in torn.message
    assert set(torn.values["counters"]) == {"2", "3"}


def test_a_failed_target_has_its_files_reported_not_read(framework_units: Any, tmp_path: Path) -> None:
    nodes, _ = spread(framework_units.path("deepspeed/zero2/global_step4"), tmp_path, 2)
    merged = sharded_check(nodes, "global_step4", fail={"t1"})
    (result,) = merged.report.results
    (lost,) = [f for f in result.files if f.get("error")]
    assert lost["path"] == "global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt"
    assert "their target failed: t1: unreachable (a test)" in lost["error"]
    assert result.is_finding  # never healthy: a partition was not read
    assert any(e.indicates == "unreadable" and e.file == lost["path"].split("/")[-1] for e in result.evidence)
    assert merged.exit_code == 1
    assert merged.to_json()["sharded"]["failed"] == {"t1": "unreachable (a test)"}
