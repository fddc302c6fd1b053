"""Every format, read from real files torch (or safetensors) wrote: names, dtypes, shapes and the exact
bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from trainprobe.checkpoint import Opaque, TensorRecord, detect, open_checkpoint
from trainprobe.errors import CorruptCheckpointError

torch = pytest.importorskip("torch")

CASES = ["plain", "legacy", "lightning", "deepspeed", "safetensors", "hf-safetensors", "hf-bin", "dcp"]

_BITS_VIEW = {torch.bfloat16: torch.uint16, torch.float8_e4m3fn: torch.uint8, torch.float8_e5m2: torch.uint8}


def _expected_numpy(t: Any) -> np.ndarray[Any, Any]:
    t = t.detach()
    if t.dtype in _BITS_VIEW:
        return t.contiguous().view(_BITS_VIEW[t.dtype]).numpy()
    return t.numpy()


@pytest.mark.parametrize("case", CASES)
def test_records_match_what_torch_wrote(written: dict[str, Any], case: str) -> None:
    w = written[case]
    assert detect(str(w.path)) is not None
    assert detect(str(w.path)).name == w.format
    with open_checkpoint(str(w.path)) as ckpt:
        assert ckpt.format == w.format
        assert ckpt.notes == []
        got = {r.name: r for r in ckpt.records}
        assert set(got) == set(w.tensors)
        for name, tensor in w.tensors.items():
            rec = got[name]
            assert rec.dtype == str(tensor.dtype).removeprefix("torch."), name
            assert rec.shape == tuple(tensor.shape), name
            np.testing.assert_array_equal(rec.array(), _expected_numpy(tensor), err_msg=name)
            assert rec.param_name == w.param_names.get(name), name
        assert ckpt.verify() == []


def test_strided_views_keep_torch_strides_and_offsets(written: dict[str, Any]) -> None:
    with open_checkpoint(str(written["plain"].path)) as ckpt:
        got = {r.name: r for r in ckpt.records}
    view, transposed = got["extra.view"], got["extra.transposed"]
    assert (view.shape, view.stride, view.storage_offset) == ((3, 3), (6, 1), 8)
    assert (transposed.shape, transposed.stride) == ((6, 4), (1, 6))
    assert got["extra.param"].is_parameter


@pytest.mark.parametrize("case", ["plain", "dcp", "lightning"])
def test_skeleton_keeps_non_tensor_objects(written: dict[str, Any], case: str) -> None:
    with open_checkpoint(str(written[case].path)) as ckpt:
        obj = ckpt.objects
    opt = {
        "plain": lambda o: o["optimizer_state_dict"],
        "dcp": lambda o: o["optim"],
        "lightning": lambda o: o["optimizer_states"][0],
    }[case](obj)
    group = opt["param_groups"][0]
    assert tuple(group["betas"]) == (0.9, 0.999)
    assert group["lr"] == pytest.approx(1e-3)
    assert group["params"] == [0, 1, 2, 3]
    assert all(isinstance(v, TensorRecord) for s in opt["state"].values() for v in s.values())


def test_placeholders_for_unknown_data_classes_are_inert(tmp_path: Any) -> None:
    import argparse

    path = tmp_path / "ns.pt"
    torch.save({"args": argparse.Namespace(lr=0.1, name="x"), "w": torch.ones(2)}, path)
    with open_checkpoint(str(path)) as ckpt:
        args = ckpt.objects["args"]
        assert isinstance(args, Opaque)
        assert args.global_name == "argparse.Namespace"
        assert args.fields() == {"lr": 0.1, "name": "x"}
        # A known data class: kept inert, and a note (not a finding) says how torch would load it.
        assert [(n.kind, n.message) for n in ckpt.notes] == [
            (
                "pickled-class",
                "a pickled argparse.Namespace in data.pkl: loading it needs torch.load(weights_only=False)",
            )
        ]


def test_a_truncated_legacy_file_says_truncated_at_its_offset_whichever_tensor_is_read_first(
    tmp_path: Any,
) -> None:
    # The storages lie in the order of their keys (ids), not of the tensors in the object: cut inside the
    # first storage, and the tensor reached first is usually one whose storage came after the cut.
    whole = tmp_path / "whole.pt"
    torch.save(
        {f"t{i}": torch.full((64,), float(i)) for i in range(12)}, whole, _use_new_zipfile_serialization=False
    )
    data = whole.read_bytes()
    storages_start = len(data) - 12 * (8 + 64 * 4)
    for cut in (storages_start + 4, storages_start + 100, len(data) - 10):
        path = tmp_path / f"cut{cut}.pt"
        path.write_bytes(data[:cut])
        with pytest.raises(CorruptCheckpointError) as caught:
            open_checkpoint(str(path))
        assert f"truncated at byte {cut:,}" in caught.value.reason
        assert "not in the file" not in caught.value.reason
