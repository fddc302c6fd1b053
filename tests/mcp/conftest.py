"""Fixtures of the MCP tests; the helpers they use live in mcp_harness.py.

No ``__init__.py`` here on purpose: a package named ``mcp`` under tests/ would shadow the SDK.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_harness import McpSession, start_server, world_readable, write_spiky_log


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    session = start_server(tmp_path_factory.mktemp("mcp"))
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def allowing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    """A server started with ``--allow-interpreters`` (``python=``/``venv=`` in a target). A module whose
    targets go through the loopback sshd uses ``sshd`` too (``usefixtures``): a session fixture is set up
    before this one, so its ssh config reaches the server's environment."""
    session = start_server(
        tmp_path_factory.mktemp("mcp-allow"), ("-m", "trainprobe", "mcp", "--allow-interpreters")
    )
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="session")
def checkpoints() -> Iterator[Path]:
    """Checkpoints written by real torch and safetensors: clean.pt, bad.safetensors (1 NaN, 1 +Inf, 1 -Inf),
    and a.pt/b.pt (b: one tensor moved, one identical)."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    root = Path(tempfile.mkdtemp(prefix="tp-mcp-ckpt-"))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    torch.save(model.state_dict(), root / "clean.pt")
    bad = {"w": torch.ones(5, 5), "b": torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])}
    save_file(bad, str(root / "bad.safetensors"))
    a = {"layer.weight": torch.ones(8, 8), "layer.bias": torch.zeros(8)}
    b = {"layer.weight": torch.ones(8, 8) * 1.5, "layer.bias": torch.zeros(8)}
    (root / "pair").mkdir()
    torch.save(a, root / "pair" / "a.pt")
    torch.save(b, root / "pair" / "b.pt")
    world_readable(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def train_log() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tp-mcp-log-"))
    write_spiky_log(root / "train.log")
    world_readable(root)
    yield root / "train.log"
    shutil.rmtree(root, ignore_errors=True)
