"""A scan imports what its files need: a safetensors file needs neither zipfile (torch files), tarfile
(torch's pre-1.0 format), nor a thread pool (concurrent.futures, which imports logging) for a small scan.
Each costs milliseconds of every call an agent makes; ``benchmarks/scan.py`` times the whole process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
from trainprobe.checkpoint import scan
report = scan([sys.argv[1]])
print(json.dumps({"exit": report.exit_code, "modules": sorted(sys.modules)}))
"""


def test_a_small_safetensors_scan_stays_lean(tmp_path: Path) -> None:
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    path = tmp_path / "small.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00\x00\x80\x3f\x00\x00\x80\x3f")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    found = json.loads(out)
    assert found["exit"] == 0
    assert sorted({"zipfile", "tarfile", "concurrent.futures", "logging"} & set(found["modules"])) == []
