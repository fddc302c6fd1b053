"""Directory scans find checkpoints by content: DCP directories and HF indexes whole, shards not twice."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainprobe.checkpoint import scan


def test_directory_finds_every_format_once(written: dict[str, Any], tmp_path: Path) -> None:
    root = written["plain"].path.parent
    renamed = root / "weights.data"  # no telling extension: detected by content
    if not renamed.exists():
        os.link(written["safetensors"].path, renamed)
    report = scan([str(root)])
    got = {f.path: f.format for f in report.files}
    expected = {str(w.path): w.format for w in written.values()}
    expected[str(renamed)] = "safetensors"
    assert got == expected
    assert all(f.verdict == "clean" for f in report.files)
    assert report.exit_code == 0
    by_format = {f.format: f for f in report.files}
    assert by_format["torch-dcp"].tensor_count == len(written["dcp"].tensors)
