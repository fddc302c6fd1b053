"""A payload, then a memo bomb: what torch.load would run first is still named (suspicious beats
corrupt), and the bomb takes no memory."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, text, torch_zip, touch

CASE = Case(scan=1, check=1, triage=1, says="SUSPICIOUS", globals=("posix.system",))


def build(folder: Path, sentinel: Path) -> Path:
    data = b"\x80\x02}(" + text("x") + touch(sentinel) + b"r" + (0xFFFFFFF0).to_bytes(4, "little") + b"u."
    return torch_zip(folder / "payload_memo.pt", data)
