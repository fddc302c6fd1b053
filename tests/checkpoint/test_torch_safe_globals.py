"""A suspicious global is one torch refuses (issue 22 item 1): the globals that
``torch.load(weights_only=True)`` of the pinned torch admits are data to trainprobe, global by global, and
what torch refuses is suspicious unless trainprobe documents why it is inert (:data:`INERT_BEYOND_TORCH`) or
names it as a class that needs ``weights_only=False``. Real files torch saves with sparse, nested and DTensor
state are read, their NaNs reported as non-finite."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import ModuleType

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.reading.pickle import torch_admits
from trainprobe.checkpoint.reading.pickle.globals import INERT_BEYOND_TORCH, KNOWN_GLOBALS
from trainprobe.checkpoint.reading.pickle.unpickler import PICKLED_CLASS, SUSPICIOUS, SafeUnpickler

torch = pytest.importorskip("torch")
from torch import _weights_only_unpickler as torch_rule  # noqa: E402

TOOL = Path(__file__).resolve().parents[2] / "tools" / "torch_safe_globals.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_safe_globals", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _global_pickle(module: str, name: str) -> bytes:
    """A protocol-2 pickle that names ``module.name`` and returns it."""
    return b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n."


def _torch_admits(module: str, name: str) -> bool:
    try:
        torch_rule.Unpickler(io.BytesIO(_global_pickle(module, name))).load()
    except Exception:  # torch's refusal is an UnpicklingError; an import torch needs would be another
        return False
    return True


def _our_kinds(module: str, name: str) -> set[str]:
    unpickler = SafeUnpickler(_global_pickle(module, name), source="data.pkl")
    unpickler.load()
    return {note.kind for note in unpickler.notes}


@pytest.fixture(scope="module")
def derived() -> tuple[str, list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    version, default, registered, blocked = _tool().derive()
    return version, default, registered, blocked


def test_the_table_is_what_the_installed_torch_derives(
    derived: tuple[str, list[tuple[str, str]], list[tuple[str, str]], list[str]],
) -> None:
    version, default, registered, blocked = derived
    assert torch_admits.TORCH_VERSION == version == torch.__version__.split("+")[0]
    assert list(torch_admits.TORCH_DEFAULT_GLOBALS) == default
    assert list(torch_admits.TORCH_REGISTERED_GLOBALS) == registered
    assert list(torch_admits.TORCH_BLOCKED_MODULES) == blocked


def test_every_global_torch_admits_is_data_to_us(
    derived: tuple[str, list[tuple[str, str]], list[tuple[str, str]], list[str]],
) -> None:
    _version, default, registered, _blocked = derived
    assert len(default) > 100
    assert ("torch.distributed.tensor", "DTensor") in registered
    wrong = {}
    for module, name in [*default, *registered]:
        assert _torch_admits(module, name), f"{module}.{name}"
        kinds = _our_kinds(module, name)
        if kinds:
            wrong[f"{module}.{name}"] = kinds
    assert wrong == {}


# (module, name) torch refuses -> what trainprobe says: suspicious, a pickled class (loading it needs
# weights_only=False), or data documented as inert
REFUSED: dict[tuple[str, str], str] = {
    ("builtins", "eval"): SUSPICIOUS,
    ("builtins", "exec"): SUSPICIOUS,
    ("builtins", "getattr"): SUSPICIOUS,
    ("builtins", "__import__"): SUSPICIOUS,
    ("os", "system"): SUSPICIOUS,
    ("posix", "system"): SUSPICIOUS,
    ("sys", "exit"): SUSPICIOUS,
    ("subprocess", "Popen"): SUSPICIOUS,
    ("subprocess", "check_output"): SUSPICIOUS,
    ("torch", "load"): SUSPICIOUS,
    ("torch.serialization", "load"): SUSPICIOUS,
    ("torch._utils", "_rebuild_device_tensor_from_numpy_x"): SUSPICIOUS,
    ("numpy", "load"): SUSPICIOUS,
    ("numpy.testing._private.utils", "runstring"): SUSPICIOUS,
    ("collections", "namedtuple"): SUSPICIOUS,
    ("functools", "partial"): SUSPICIOUS,
    ("argparse", "Namespace"): PICKLED_CLASS,
    ("torch.nn.modules.linear", "Linear"): PICKLED_CLASS,
    ("transformers.training_args", "TrainingArguments"): PICKLED_CLASS,
    ("collections", "defaultdict"): "inert",
    ("collections", "deque"): "inert",
    ("numpy", "ndarray"): "inert",
    ("numpy", "dtype"): "inert",
    ("numpy.core.multiarray", "_reconstruct"): "inert",
    ("numpy._core.multiarray", "scalar"): "inert",
    ("datetime", "datetime"): "inert",
    ("pathlib", "PosixPath"): "inert",
}


@pytest.mark.parametrize(("module", "name"), sorted(REFUSED))
def test_what_torch_refuses_is_suspicious_unless_documented(module: str, name: str) -> None:
    assert not _torch_admits(module, name)
    kinds = _our_kinds(module, name)
    expected = REFUSED[(module, name)]
    if expected == "inert":
        assert kinds == set()
        assert INERT_BEYOND_TORCH[(module, name)]
    else:
        assert kinds == {expected}


def test_every_data_global_beyond_torch_says_why_it_is_inert() -> None:
    admitted = {*torch_admits.TORCH_DEFAULT_GLOBALS, *torch_admits.TORCH_REGISTERED_GLOBALS}
    data = {pair for pair, known in KNOWN_GLOBALS.items() if known.kind == "data"}
    beyond = data - admitted
    assert beyond == set(INERT_BEYOND_TORCH) - admitted
    assert all(INERT_BEYOND_TORCH[pair].strip() for pair in beyond)
    assert not any(module in torch_admits.TORCH_BLOCKED_MODULES for module, _name in data)


_SAVE = """
import sys, tempfile, torch
out = sys.argv[1]
nan = float("nan")
if sys.argv[2] == "sparse":
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, nan]), (2, 2))
    dense = torch.eye(4)
    dense[2, 2] = nan
    torch.save({"coo": coo, "csr": dense.to_sparse_csr(), "csc": torch.eye(3).to_sparse_csc(),
                "bsr": torch.eye(4).to_sparse_bsr((2, 2))}, out)
elif sys.argv[2] == "nested":
    first = torch.ones(2, 3)
    first[0, 1] = nan
    torch.save({"jagged": torch.nested.nested_tensor([first, torch.ones(4, 3)], layout=torch.jagged)}, out)
else:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    weight = torch.ones(4, 3)
    weight[1, 1] = nan
    torch.save({"w": distribute_tensor(weight, mesh, [Shard(0)]),
                "b": distribute_tensor(torch.ones(2), mesh, [Replicate()])}, out)
    dist.destroy_process_group()
"""


@pytest.mark.parametrize("kind", ["sparse", "nested", "dtensor"])
def test_a_nan_in_a_file_torch_loads_is_nonfinite_not_suspicious(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.pt"
    subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(_SAVE), str(path), kind],
        check=True,
        capture_output=True,
        timeout=300,
    )
    for module in _tool().REGISTERING_MODULES:  # torch.load admits NJTs and DTensors once these are imported
        importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "sparse CSR support is in beta state"
        torch.load(path, weights_only=True)  # torch itself admits the file
    report = scan([str(path)])
    (unit,) = report.units
    notes = [note.message for part in unit.files for note in part.notes]
    assert unit.verdict == "nonfinite", notes
    assert not any("suspicious" in message for message in notes)
    # (an NJT pickles its values tensor twice, as tied weights are: named, and counted, at each place)
    assert unit.nonfinite >= (2 if kind == "sparse" else 1)
    bad = {t.name for part in unit.files for t in part.tensors if t.nonfinite}
    if kind == "sparse":  # named by torch's own parts, not by the rebuild call's arguments
        assert bad == {"coo.values", "csr.values"}


@pytest.mark.parametrize("data", [b"K\x01\x85", b"X\x01\x00\x00\x00x\x85", b")"])
def test_a_sparse_rebuild_with_data_it_does_not_know_is_kept_as_given(data: bytes) -> None:
    # _rebuild_sparse_tensor(_get_layout("torch.sparse_coo"), <data>): a tuple too short, of a string, empty
    layout = b"ctorch.serialization\n_get_layout\nX\x10\x00\x00\x00torch.sparse_coo\x85R"
    pickle_bytes = b"\x80\x02ctorch._utils\n_rebuild_sparse_tensor\n" + layout + data + b"\x86R."
    unpickler = SafeUnpickler(pickle_bytes, source="data.pkl")
    value = unpickler.load()
    assert isinstance(value, tuple)
    assert unpickler.notes == []
