"""NaN tensors passed to classes trainprobe keeps inert: an ``argparse.Namespace`` built by NEWOBJ
with a tensor argument, and a ``types.SimpleNamespace`` with a tensor keyword (NEWOBJ_EX): both found."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, glob, named, pickle_of, tensor, text, torch_zip, tuple_of

CASE = Case(scan=1, check=1, triage=1, says="ns.<arg 0>")


def build(folder: Path, sentinel: Path) -> Path:
    newobj = glob("argparse", "Namespace") + tuple_of(tensor("0", (2,))) + b"\x81"
    kwargs = b"}" + text("w") + tensor("1", (1,)) + b"s"
    newobj_ex = glob("types", "SimpleNamespace") + b")" + kwargs + b"\x92"
    data = pickle_of(named(ns=newobj, kw=newobj_ex))
    return torch_zip(folder / "args.pt", data, {"0": f32(NAN, 1.0), "1": f32(NAN)})
