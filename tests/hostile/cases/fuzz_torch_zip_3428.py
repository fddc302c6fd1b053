"""Found by the fuzzer (seed torch-zip, case 3428: 0xffffffff80000000 written over a float32 step counter of
Adam's state, making it NaN): ``check`` raised ValueError turning the counter into an int. Rebuilt from the
same seed and case number (needs torch, which writes the seed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile.craft import Case

CASE = Case(scan=1, check=1, triage=1, says="NaN")


def build(folder: Path, sentinel: Path) -> Path:
    pytest.importorskip("torch")
    from hostile.fuzz import make_case
    from hostile.fuzz_seeds import write_seeds

    (folder.parent / "seeds").mkdir()
    seed = next(s for s in write_seeds(folder.parent / "seeds") if s.name == "torch-zip")
    path, mutations = make_case(seed, 3428, folder)
    assert mutations == ["int 0xffffffff80000000 at 2880"], mutations
    return path
