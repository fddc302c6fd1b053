"""What the unpickler reports (issue 14 items 1-2): exact (module, name) pairs, known classes as notes, code
that would run as suspicious — in scan, check and diff alike — and every pickle torch.load would read.

Payloads are built opcode by opcode and write a sentinel file if they ever ran: each test asserts the
sentinel is absent and the global is named."""

from __future__ import annotations

import io
import os
import pickle
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths
from trainprobe.checkpoint.diff import diff_paths
from trainprobe.checkpoint.reading.pickle.globals import KNOWN_GLOBALS, classify_global

torch = pytest.importorskip("torch")


def _text(value: str) -> bytes:
    raw = value.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def _global4(module: str, name: str) -> bytes:
    return _text(module) + _text(name) + b"\x93"


def _call(func: bytes, *args: str) -> bytes:
    """func(*args) via REDUCE."""
    return func + b"(" + b"".join(_text(a) for a in args) + b"tR"


def _dict_of(**items: bytes) -> bytes:
    """{key: <pickled value>} then STOP, protocol 4."""
    body = b"".join(_text(k) + v for k, v in items.items())
    return b"\x80\x04}(" + body + b"u."


def _zip(path: Path, records: list[tuple[str, bytes]]) -> Path:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # "Duplicate name": the point of one case
        for name, data in records:
            zf.writestr(zipfile.ZipInfo(name), data)
    return path


def _touch(sentinel: Path) -> bytes:
    return _call(_global4("posix", "system"), f"touch {sentinel}")


# name -> (how to build the file in a folder, the global the report must name)
Builder = Callable[[Path, Path], Path]


def _dotted_name(folder: Path, sentinel: Path) -> Path:
    # pathlib is data only as exact classes: Path.touch, reached through a dotted name, would create a file.
    data = _dict_of(x=_call(_global4("pathlib", "Path.touch"), str(sentinel)))
    return _zip(folder / "dotted.pt", [("archive/data.pkl", data)])


def _module_prefix(folder: Path, sentinel: Path) -> Path:
    # numpy was a trusted prefix; a numpy.testing helper runs a string as code.
    data = _dict_of(
        x=_call(_global4("numpy.testing._private.utils", "runstring"), f"open({str(sentinel)!r},'w')")
    )
    return _zip(folder / "prefix.pt", [("archive/data.pkl", data)])


def _called_known_class(folder: Path, sentinel: Path) -> Path:
    # A known config class *called* with arguments would run its constructor (NEWOBJ/BUILD would not).
    data = _dict_of(x=_call(_global4("transformers.training_args", "TrainingArguments"), str(sentinel)))
    return _zip(folder / "called.pt", [("archive/data.pkl", data)])


def _second_data_pkl(folder: Path, sentinel: Path) -> Path:
    # torch reads the first record of a name; a scanner reading the last would see the benign one.
    return _zip(
        folder / "dup.pt",
        [("archive/data.pkl", _dict_of(x=_touch(sentinel))), ("archive/data.pkl", _dict_of(x=b"N"))],
    )


def _nul_name(folder: Path, sentinel: Path) -> Path:
    # zipfile cuts names at a NUL when writing: write a placeholder byte, then make it a NUL in place.
    path = _zip(
        folder / "nul.pt",
        [("archive/data.pkl", _dict_of(x=b"N")), ("archive/data.pkl~.txt", _dict_of(x=_touch(sentinel)))],
    )
    path.write_bytes(path.read_bytes().replace(b"data.pkl~.txt", b"data.pkl\x00.txt"))
    return path


def _bare_pickle(folder: Path, sentinel: Path) -> Path:
    path = folder / "bare.pt"
    path.write_bytes(_dict_of(x=_touch(sentinel)))
    return path


def _prepended(folder: Path, sentinel: Path) -> Path:
    inner = folder / "inner.zip"
    torch.save({"w": torch.ones(2)}, inner)
    path = folder / "prepended.pt"
    path.write_bytes(_dict_of(x=_touch(sentinel)) + inner.read_bytes())
    inner.unlink()
    return path


def _payload_then_garbage(folder: Path, sentinel: Path) -> Path:
    # torch would run the payload before reaching the bytes that break the unpickler.
    data = b"\x80\x04}(" + _text("x") + _touch(sentinel) + b"\xff\xff garbage"
    return _zip(folder / "broken.pt", [("archive/data.pkl", data)])


def _legacy_header(folder: Path, sentinel: Path) -> Path:
    # The magic-number pickle of a legacy file is unpickled first: a payload there runs first.
    path = folder / "legacy.pt"
    path.write_bytes(b"\x80\x02" + _touch(sentinel) + b"." + b"\x80\x02K\x01.")
    return path


CASES: dict[str, tuple[Builder, str]] = {
    "dotted name": (_dotted_name, "pathlib.Path.touch"),
    "module prefix": (_module_prefix, "numpy.testing._private.utils.runstring"),
    "called known class": (_called_known_class, "transformers.training_args.TrainingArguments"),
    "second data.pkl": (_second_data_pkl, "posix.system"),
    "NUL in a record name": (_nul_name, "posix.system"),
    "bare pickle named .pt": (_bare_pickle, "posix.system"),
    "pickle prepended to a zip": (_prepended, "posix.system"),
    "payload then garbage": (_payload_then_garbage, "posix.system"),
    "legacy header": (_legacy_header, "posix.system"),
}


@pytest.mark.parametrize("case", CASES)
def test_what_would_run_is_suspicious_everywhere(tmp_path: Path, case: str) -> None:
    build, global_name = CASES[case]
    sentinel = tmp_path / "pwned"
    folder = tmp_path / "run"
    folder.mkdir()
    path = build(folder, sentinel)

    for target in (str(path), str(folder)):  # given explicitly, and found inside a directory
        report = scan([target])
        assert report.exit_code == 1, report.to_json()
        (unit,) = report.units
        assert unit.verdict == "suspicious"
        notes = [n.message for f in unit.files for n in f.notes if n.kind == "suspicious-global"]
        assert any(global_name in n for n in notes), notes
    checked = check_paths([str(path)])
    assert checked.exit_code == 1
    (result,) = checked.results
    assert result.verdict == "suspicious"
    assert global_name in result.reason
    assert not sentinel.exists()


def test_diff_fails_on_a_suspicious_global(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    a = tmp_path / "a.pt"
    torch.save({"w": torch.ones(2)}, a)
    b = _second_data_pkl(tmp_path, sentinel)
    report = diff_paths(str(a), str(b))
    assert report.exit_code == 1
    assert report.verdict == "suspicious"
    assert any("posix.system" in s for s in report.suspicious)
    assert not sentinel.exists()


def _one_unit_notes(path: Path) -> tuple[str, list[tuple[str, str]]]:
    report = scan([str(path)])
    (unit,) = report.units
    return unit.verdict, [(n.kind, n.message) for f in unit.files for n in f.notes]


def test_a_whole_pickled_model_is_a_note(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)), path)
    verdict, notes = _one_unit_notes(path)
    assert verdict == "clean"
    assert (
        "pickled-class",
        "a pickled torch.nn Linear module (torch.nn.modules.linear.Linear) in data.pkl: loading it needs "
        "torch.load(weights_only=False)",
    ) in notes


def test_torchscript_and_quantized_tensors_are_not_suspicious(tmp_path: Path) -> None:
    ts = tmp_path / "scripted.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates torch.jit.script
        torch.jit.script(torch.nn.Linear(3, 2)).save(str(ts))
    verdict, notes = _one_unit_notes(ts)
    assert verdict == "clean"
    assert any("TorchScript" in m and "torch.jit.load" in m for _k, m in notes)
    q = tmp_path / "quantized.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch 2.13 deprecates quantized tensors
        qt = torch.quantize_per_tensor(torch.randn(4), 0.1, 3, torch.qint8)
        qc = torch.quantize_per_channel(
            torch.randn(2, 3), torch.tensor([0.1, 0.2]), torch.tensor([0, 1]), 0, torch.quint8
        )
    torch.save({"q": qt, "qc": qc}, q)
    assert _one_unit_notes(q) == ("clean", [])


def test_config_dataclasses_rebuilt_by_newobj_are_notes(tmp_path: Path) -> None:
    # What training_args.bin holds: a TrainingArguments rebuilt by NEWOBJ + BUILD, enums called with a value.
    enum = _call(_global4("transformers.trainer_utils", "IntervalStrategy"), "steps")
    obj = (
        _global4("transformers.training_args", "TrainingArguments")
        + b")\x81}("
        + _text("output_dir")
        + _text("out")
        + _text("eval_strategy")
        + enum
        + b"ub."
    )
    path = tmp_path / "training_args.bin"
    _zip(path, [("training_args/data.pkl", b"\x80\x04" + obj)])
    verdict, notes = _one_unit_notes(path)
    assert verdict == "clean"
    assert [k for k, _m in notes] == ["pickled-class", "pickled-class"]
    assert "transformers TrainingArguments" in notes[0][1]


def test_the_allowlist_is_exact() -> None:
    assert all("." not in name for _module, name in KNOWN_GLOBALS)
    assert classify_global("numpy", "ndarray") is not None
    assert classify_global("numpy", "load") is None
    assert classify_global("torch.distributed.checkpoint.filesystem", "FileSystemReader") is None
    assert classify_global("pathlib", "Path") is not None
    assert classify_global("pathlib", "Path.touch") is None
    assert classify_global("__torch__.torch.nn.modules.linear", "Linear") is not None


def test_tar_format_is_read_for_its_pickles(tmp_path: Path) -> None:
    import tarfile

    sentinel = tmp_path / "pwned"
    path = tmp_path / "old.tar"
    with tarfile.open(path, "w") as tar:
        data = _dict_of(x=_touch(sentinel))
        info = tarfile.TarInfo("pickle")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    report = scan([str(path)])
    assert report.units[0].verdict == "suspicious"
    assert report.exit_code == 1
    assert not sentinel.exists()
    benign = tmp_path / "benign.tar"
    with tarfile.open(benign, "w") as tar:
        data = pickle.dumps({"a": 1}, protocol=2)
        info = tarfile.TarInfo("pickle")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    report = scan([str(benign)])
    assert report.units[0].verdict == "unreadable"  # its tensors are not read: never reported healthy
    assert "tar format" in (report.files[0].error or "")


def test_look_alikes_no_reader_claims_are_listed_not_dropped(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2)}, tmp_path / "good.pt")
    (tmp_path / "weights.npz").write_bytes(b"not something trainprobe reads" * 4)
    (tmp_path / "notes.txt").write_text("a note")
    report = scan([str(tmp_path)])
    verdicts = {os.path.basename(u.path): u.verdict for u in report.units}
    assert verdicts == {"good.pt": "clean", "weights.npz": "unreadable"}
    assert report.exit_code == 2
