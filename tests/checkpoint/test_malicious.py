"""Crafted pickles that would run code on torch.load(weights_only=False): trainprobe never runs them,
reports each suspicious global, and still scans the tensors beside them."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import open_checkpoint, scan

torch = pytest.importorskip("torch")


class _Payload:
    """Pickles as ``func(*args)``: what a malicious checkpoint carries."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


def _payloads(sentinel: Path) -> dict[str, tuple[Any, str]]:
    s = str(sentinel)
    return {
        "os.system": (_Payload(os.system, f"touch {s}"), "posix.system"),
        "subprocess.Popen": (_Payload(subprocess.Popen, ["touch", s]), "subprocess.Popen"),
        "subprocess.check_call": (_Payload(subprocess.check_call, ["touch", s]), "subprocess.check_call"),
        "eval": (_Payload(builtins.eval, f"open({s!r}, 'w')"), "builtins.eval"),
        "exec": (_Payload(builtins.exec, f"open({s!r}, 'w').write('x')"), "builtins.exec"),
        # getattr(os, "system") fetched by REDUCE, then called by a second REDUCE.
        "getattr": (_Payload(_Payload(getattr, os, "system"), f"touch {s}"), "builtins.getattr"),
    }


@pytest.mark.parametrize("layout", ["zip", "legacy"])
@pytest.mark.parametrize("kind", ["os.system", "subprocess.Popen", "subprocess.check_call", "eval", "exec"])
def test_payload_never_runs_and_is_reported(tmp_path: Path, layout: str, kind: str) -> None:
    sentinel = tmp_path / "pwned"
    payload, global_name = _payloads(sentinel)[kind]
    obj = {"model": {"w": torch.tensor([1.0, float("nan")])}, "meta": {"deep": [payload]}}
    path = tmp_path / "evil.pt"
    if layout == "legacy":
        torch.save(obj, path, _use_new_zipfile_serialization=False)
    else:
        torch.save(obj, path)
    report = scan([str(path)])
    assert not sentinel.exists()
    (f,) = report.files
    source = "the object pickle" if layout == "legacy" else "data.pkl"
    assert [n.message for n in f.notes] == [f"suspicious global {global_name} in {source}"]
    assert f.bad_tensors[0].name == "model.w"
    assert f.bad_tensors[0].nan == 1
    assert report.exit_code == 1


def _text(value: str) -> bytes:
    raw = value.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def _hand_written(sentinel: Path) -> dict[str, tuple[bytes, list[str]]]:
    """Pickles built opcode by opcode, as an attacker would, each inside a state dict: {"x": <payload>}."""
    cmd = _text(f"touch {sentinel}")
    head, tail = b"\x80\x02}" + _text("x"), b"s."
    return {
        "GLOBAL os.system + REDUCE": (head + b"cos\nsystem\n" + cmd + b"\x85R" + tail, ["os.system"]),
        "getattr(__import__('os'), 'system')(...)": (
            head
            + b"cbuiltins\ngetattr\ncbuiltins\n__import__\n"
            + _text("os")
            + b"\x85R"
            + _text("system")
            + b"\x86R"
            + cmd
            + b"\x85R"
            + tail,
            ["builtins.getattr", "builtins.__import__"],
        ),
        "STACK_GLOBAL subprocess.run": (
            b"\x80\x04}"
            + _text("x")
            + _text("subprocess")
            + _text("run")
            + b"\x93]"
            + _text("touch")
            + b"a"
            + _text(str(sentinel))
            + b"a\x85R"
            + tail,
            ["subprocess.run"],
        ),
    }


@pytest.mark.parametrize(
    "case",
    ["GLOBAL os.system + REDUCE", "getattr(__import__('os'), 'system')(...)", "STACK_GLOBAL subprocess.run"],
)
def test_hand_written_pickles(tmp_path: Path, case: str) -> None:
    import zipfile

    sentinel = tmp_path / "pwned"
    data, globals_ = _hand_written(sentinel)[case]
    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", data)
    with open_checkpoint(str(path)) as ckpt:
        assert "x" in ckpt.objects  # the pickle completed, inert
    report = scan([str(path)])
    assert not sentinel.exists()
    assert [n.message for n in report.files[0].notes] == [
        f"suspicious global {g} in data.pkl" for g in globals_
    ]
    assert report.files[0].verdict == "suspicious"
    assert report.exit_code == 1
    # The payload is real: the standard unpickler runs it.
    subprocess.run(
        [sys.executable, "-c", "import pickle,sys; pickle.loads(sys.stdin.buffer.read())"],
        input=data,
        check=False,
        capture_output=True,
    )
    assert sentinel.exists()
