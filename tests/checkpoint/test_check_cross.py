"""Evidence between units of one run, from their tensors' fingerprints: a later unit holding an earlier
unit's optimizer moments bit for bit is an earlier state under a later step (corrupt); tensors that stay
identical without a moment that should have moved are frozen layers (a note). Real torch-written files."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint.check import check_paths  # noqa: E402
from trainprobe.triage import triage  # noqa: E402


def _run(root: Path, *, freeze_first: bool = False) -> dict[int, dict[str, Any]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    if freeze_first:
        for p in model[0].parameters():
            p.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    saved = {}
    for step in range(1, 31):
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        if step % 10 == 0:
            state = {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}
            saved[step] = copy.deepcopy(state)
            torch.save(state, root / f"step_{step}.pt")
    return saved


def test_a_stale_save_relabelled_later_is_corrupt(tmp_path: Path) -> None:
    saved = _run(tmp_path)
    stale = copy.deepcopy(saved[10])
    stale["step"] = 40  # relabelled: the step field and the counters say 40, every moment is step 10's
    for entry in stale["optimizer"]["state"].values():
        entry["step"] = torch.tensor(40.0)
    stale["model"]["0.weight"][0, 0] = float("nan")
    torch.save(stale, tmp_path / "step_40.pt")
    by_name = {Path(r.path).name: r for r in check_paths([str(tmp_path)]).results}
    bad = by_name["step_40.pt"]
    assert bad.verdict == "nonfinite"  # the NaN is the worst, and the stale state is said beside it
    (moments,) = [e for e in bad.evidence if e.check == "moments-unchanged"]
    assert moments.outcome == "fail"
    assert "8 optimizer moment(s)" in moments.message
    assert "step_10.pt's (step 10)" in moments.message
    assert {by_name[f"step_{s}.pt"].verdict for s in (10, 20, 30)} == {"consistent"}
    report = triage(str(tmp_path))
    assert report.resume_from is not None
    assert report.resume_from.relpath == "step_30.pt"
    (stale,) = [line for line in report.answers["broken"]["lines"] if line.startswith("stale: ")]
    assert stale.startswith(
        "stale: step_40.pt (step 40) holds the state of step_10.pt (step 10): 11 of its 16 tensors are "
        "bit-identical to that unit's, 8 optimizer moment(s) among them, while it records step 40"
    )


def test_a_stale_relabel_without_nan_is_corrupt_not_consistent(tmp_path: Path) -> None:
    saved = _run(tmp_path)
    stale = copy.deepcopy(saved[10])
    stale["step"] = 40
    for entry in stale["optimizer"]["state"].values():
        entry["step"] = torch.tensor(40.0)
    torch.save(stale, tmp_path / "step_40.pt")
    by_name = {Path(r.path).name: r for r in check_paths([str(tmp_path)]).results}
    assert by_name["step_40.pt"].verdict == "corrupt", by_name["step_40.pt"].reason
    assert "earlier state under a later step" in by_name["step_40.pt"].reason


def test_frozen_layers_of_a_healthy_run_are_a_note_not_a_finding(tmp_path: Path) -> None:
    _run(tmp_path, freeze_first=True)
    results = {Path(r.path).name: r for r in check_paths([str(tmp_path)]).results}
    assert {r.verdict for r in results.values()} == {"consistent"}
    notes = [e for e in results["step_20.pt"].evidence if e.check == "frozen-tensors"]
    assert notes
    assert "2 of its" in notes[0].message
    assert "frozen layers" in notes[0].message
    lines = triage(str(tmp_path)).answers["broken"]["lines"]
    assert lines[0] == "nothing: every one of 3 checkpoint(s) is finite and not torn"
    assert (
        "frozen layers: step_20.pt (step 20) shares 2 of its 10 tensors with step_10.pt (step 10), no "
        "optimizer moment among them and its 4 moment(s) moved: frozen layers (or parameters the optimizer "
        "does not update), not a stale save"
    ) in lines
    assert not any(line.startswith("stale: ") for line in lines)
