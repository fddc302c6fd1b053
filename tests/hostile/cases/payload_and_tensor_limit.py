"""A payload, then 120,000 references to one tensor (past the per-file tensor limit): the limit refuses
the file, and the payload is still named (suspicious beats unreadable)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, pickle_of, tensor, text, torch_zip, touch

CASE = Case(scan=1, check=1, triage=1, says="SUSPICIOUS", globals=("posix.system",))


def build(folder: Path, sentinel: Path) -> Path:
    refs = b"(" + b"h\x00" * 120_000 + b"e"
    body = (
        b"}(" + text("run") + touch(sentinel) + text("w") + b"]" + tensor("0", (1,)) + b"q\x00" + refs + b"u"
    )
    return torch_zip(folder / "limit.pt", pickle_of(body), {"0": f32(1.0)})
