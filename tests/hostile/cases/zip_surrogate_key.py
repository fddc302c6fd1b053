"""A torch-zip state dict whose key holds a lone surrogate (``"w\\udcff"``, pickled with surrogatepass as
torch.save would) on a NaN tensor: the unit fingerprint hashes names as bytes, so every command says
non-finite, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, dict_of, f32, pickle_of, tensor, text, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="NON-FINITE", seconds=10.0)


def build(folder: Path, sentinel: Path) -> Path:
    w = tensor("0", (2,))
    return torch_zip(folder / "model.pt", pickle_of(dict_of([(text("w\udcff"), w)])), {"0": f32(NAN, 1.0)})
