"""``scan|check --on FLEET --sharded PATH`` on real parts: a DCP checkpoint written by 4 ranks (gloo, FSDP2)
and a DeepSpeed ZeRO-2 checkpoint of 2 ranks, their files spread over the node-local directories (the homes)
of 4 loopback sshd users, each a target with a Python that has only numpy. One rank file holds a NaN, one file
is on no target: the merged report equals the scan of all the files in one place, names the NaN by tensor
and rank file, and names the missing file. ``check --sharded`` through the CLI: a DeepSpeed checkpoint whose
rank-1 partition is another save's is torn exactly as a check of all files in one place says it; the DCP
checkpoint's NaN and missing file are found as in one place, and the checks that relate its rank files are
named as not made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.frameworks import damage
from fixtures.frameworks.node_local import spread_over_nodes
from fixtures.sshd import SshServer, SshSetup
from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths
from trainprobe.tasks import ShareProgress, scan_sharded

pytestmark = pytest.mark.ssh
pytest.importorskip("torch")
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


@pytest.fixture(scope="module")
def nodes(ssh_setup: SshSetup, sshd: SshServer, numpy_venv: Path) -> Iterator[list[tuple[str, Path]]]:
    """Four targets (users of the loopback sshd), each with its home as its node-local disk."""
    out = []
    for k in range(4):
        user = ssh_setup.add_user(f"nd{k}", "/bin/bash")
        home = ssh_setup.root / "home" / user
        out.append((f"ssh={user}@{sshd.host}:{sshd.port}//python={numpy_venv}", home))
    yield out
    for _target, home in out:
        shutil.rmtree(home / "ckpt", ignore_errors=True)


def place(source: Path, nodes: list[tuple[str, Path]], drop: str | None, gathered: Path) -> None:
    """``source`` spread over the nodes' ``ckpt/`` by writer rank (readable by their users), and gathered in
    one place; ``drop`` removed everywhere."""
    homes = [home / "ckpt" for _t, home in nodes]
    for home in homes:
        shutil.rmtree(home / source.name, ignore_errors=True)
    spread_over_nodes(source, homes, ranks_per_node=1)
    shutil.copytree(source, gathered / "ckpt" / source.name)
    for folder in (*homes, gathered / "ckpt"):
        if drop:
            (folder / source.name / drop).unlink(missing_ok=True)
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
        folder.chmod(0o755)


def without_timings(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc.pop("sharded", None)
    doc["totals"].pop("seconds")
    for f in doc["files"]:
        f["totals"].pop("seconds")
    return doc


def local(gathered: Path, path: str) -> dict[str, Any]:
    here = os.getcwd()
    os.chdir(gathered)
    try:
        return scan([path]).to_json()
    finally:
        os.chdir(here)


def test_a_dcp_checkpoint_on_4_nodes_is_one_report(
    framework_units: Any, nodes: list[tuple[str, Path]], tmp_path: Path
) -> None:
    hurt = damage.nan_in_exp_avg_sq(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path / "src", rank=2)
    place(hurt.root, nodes, "__3_0.distcp", tmp_path / "gathered")
    seen: list[ShareProgress] = []
    result = scan_sharded([t for t, _h in nodes], "ckpt/step_3", on_progress=seen.append)
    assert without_timings(result.to_json()) == without_timings(local(tmp_path / "gathered", "ckpt/step_3"))
    (unit,) = result.report.units
    (part,) = unit.files
    (bad,) = part.bad_tensors
    assert (bad.name, bad.file, bad.nan) == (
        "optimizer.state.0.weight.exp_avg_sq@8,0",
        "ckpt/step_3/__2_0.distcp",
        1,
    )
    assert part.error == "data file __3_0.distcp (holding optimizer.param_groups.0.eps) is missing"
    sharded = result.to_json()["sharded"]
    targets = [t for t, _h in nodes]
    assert sharded["readers"] == {f"__{r}_0.distcp": targets[r] for r in range(3)}
    assert sharded["missing"] == {"ckpt/step_3": ["__3_0.distcp"]}
    assert sharded["failed"] == {}
    assert result.exit_code == 1
    finished = {p.target for p in seen if p.done and p.error is None}
    assert finished == set(targets[:3])  # the fourth holds nothing of it to read
    assert all(p.bytes_done == p.bytes > 0 for p in seen if p.done)


def test_deepspeed_partitions_and_the_cli(
    framework_units: Any, nodes: list[tuple[str, Path]], tmp_path: Path
) -> None:
    gone = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    place(framework_units.path("deepspeed/zero2/global_step4"), nodes[:2], gone, tmp_path / "gathered")
    argv = [TRAINPROBE, "scan", "--json", "--sharded", "ckpt/global_step4"]
    for target, _home in nodes:
        argv += ["--on", target]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout)
    assert without_timings(document) == without_timings(local(tmp_path / "gathered", "ckpt/global_step4"))
    (zero,) = [e for e in document["units"][0]["evidence"] if e["check"] == "zero-partitions"]
    assert zero["outcome"] == "fail"
    assert gone in zero["message"]
    assert document["sharded"]["readers"] == {
        "mp_rank_00_model_states.pt": nodes[0][0],
        "zero_pp_rank_0_mp_rank_00_optim_states.pt": nodes[0][0],
    }
    assert f"✓ {nodes[0][0]}: 2/2 file(s)" in proc.stderr  # progress: files and bytes per target


def local_check(gathered: Path, path: str) -> dict[str, Any]:
    here = os.getcwd()
    os.chdir(gathered)
    try:
        return check_paths([path]).to_json()
    finally:
        os.chdir(here)


def check_cli(targets: list[str], path: str) -> tuple[int, dict[str, Any], str]:
    argv = [TRAINPROBE, "check", "--json", "--sharded", path]
    for target in targets:
        argv += ["--on", target]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ})
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_a_stale_deepspeed_partition_on_another_node_is_torn(
    framework_units: Any, nodes: list[tuple[str, Path]], tmp_path: Path
) -> None:
    zero2 = framework_units.path("deepspeed/zero2")
    torn = damage.stale_optimizer(zero2 / "global_step4", zero2 / "global_step2", tmp_path / "src")
    place(torn.root, nodes[:2], None, tmp_path / "gathered")
    code, document, stderr = check_cli([t for t, _h in nodes], "ckpt/global_step4")
    assert code == 1, stderr
    sharded = document.pop("sharded")
    assert document == local_check(tmp_path / "gathered", "ckpt/global_step4")
    (result,) = document["units"]
    assert result["verdict"] == "torn"
    assert any(e["check"] == "step-counters" and e["outcome"] == "fail" for e in result["evidence"])
    assert sharded["readers"]["zero_pp_rank_1_mp_rank_00_optim_states.pt"] == nodes[1][0]
    assert f"✓ {nodes[1][0]}: 1/1 file(s)" in stderr  # progress: files and bytes per target


def test_a_dcp_checkpoint_on_4_nodes_finds_the_nan_and_the_missing_file(
    framework_units: Any, nodes: list[tuple[str, Path]], tmp_path: Path
) -> None:
    hurt = damage.nan_in_exp_avg_sq(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path / "src", rank=2)
    place(hurt.root, nodes, "__3_0.distcp", tmp_path / "gathered")
    code, document, stderr = check_cli([t for t, _h in nodes], "ckpt/step_3")
    assert code == 1, stderr
    (result,) = document["units"]
    (whole,) = local_check(tmp_path / "gathered", "ckpt/step_3")["units"]
    assert result["verdict"] == whole["verdict"] == "nonfinite"
    assert result["nonfinite"] == whole["nonfinite"]
    assert result["nonfinite"][0]["name"] == "optimizer.state.0.weight.exp_avg_sq@8,0"
    same = {e["check"]: e for e in whole["evidence"] if e["check"] in ("dcp-coverage", "non-finite")}
    assert {e["check"]: e for e in result["evidence"] if e["check"] in same} == same
    assert "data file __3_0.distcp (holding optimizer.param_groups.0.eps) is missing" in result[
        "reason"
    ] + str(result["evidence"])
    assert any(e["check"] == "sharded" and e["outcome"] == "skip" for e in result["evidence"])
    assert document["sharded"]["missing"] == {"ckpt/step_3": ["__3_0.distcp"]}
