"""`trainprobe mcp` is the same server as ``python -m trainprobe.mcp``: what an MCP client registers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp_harness import start_server


def test_trainprobe_mcp_serves_every_tool(tmp_path: Path) -> None:
    session = start_server(tmp_path, ("-m", "trainprobe", "mcp"))
    try:
        names = {tool.name for tool in session.tools()}
        assert names == {"triage", "scan", "check", "diff", "logs", "watch_tail", "probe", "run"}
        result = session.call("scan", {"paths": [str(tmp_path / "gone.pt")]})
        assert result.structured_content is not None
        assert result.structured_content["exit_code"] == 2  # unreadable, as `trainprobe scan` says
    finally:
        session.close()


def test_mcp_help_teaches_how_to_register_it() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "mcp", "--help"], capture_output=True, text=True, check=True
    )
    assert "claude mcp add" in proc.stdout
    assert "trainprobe[mcp]" in proc.stdout
