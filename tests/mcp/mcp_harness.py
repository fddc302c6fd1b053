"""Helpers of the MCP tests (a module of its own: which ``conftest`` a test imports depends on what ran
before it). The MCP server under test is ``python -m trainprobe.mcp`` in a real subprocess, driven over
stdio by the SDK's own client (:class:`McpSession`),
with its runs directory and targets file in temporary directories.

No ``__init__.py`` here on purpose: a package named ``mcp`` under tests/ would shadow the SDK.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, Tool

TARGETS_TOML = """\
[groups]
two-locals = ["local//env=TP_SIDE=a", "local//env=TP_SIDE=b"]
"""


#: the server's command line after the interpreter (``python -m trainprobe mcp`` is the same server)
SERVER_ARGS = ("-m", "trainprobe.mcp")


class McpSession:
    """One server process and the SDK client connected to it, with blocking methods for tests.

    The client lives in one task of an event loop on a background thread: its context (anyio task groups and
    cancel scopes) must be entered and left in the same task, so requests reach that task through a queue.
    The server's stderr goes to ``stderr_log``."""

    def __init__(
        self, env: dict[str, str], cwd: Path, stderr_log: Path, args: tuple[str, ...] = SERVER_ARGS
    ) -> None:
        self.env = env
        self.args = args
        self.cwd = cwd
        self.stderr_log = stderr_log
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._output_schemas: dict[str, dict[str, Any]] = {}
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def start(self) -> McpSession:
        self._thread.start()
        if not self._ready.wait(60) or self._failure is not None:
            raise RuntimeError(f"the MCP server did not start: {self._failure!r}\n{self.stderr()}")
        return self

    async def _serve(self) -> None:
        params = StdioServerParameters(
            command=sys.executable, args=list(self.args), env=self.env, cwd=str(self.cwd)
        )
        try:
            with open(self.stderr_log, "w") as errlog:
                async with Client(stdio_client(params, errlog=errlog)) as client:
                    self._loop = asyncio.get_running_loop()
                    self._queue = asyncio.Queue()
                    self._ready.set()
                    while (item := await self._queue.get()) is not None:
                        work, future = item
                        try:
                            future.set_result(await work(client))
                        except BaseException as exc:  # handed to the test thread
                            future.set_exception(exc)
        except BaseException as exc:
            self._failure = exc
            self._ready.set()

    def _submit(self, work: Callable[[Client], Awaitable[Any]], timeout: float) -> Any:
        assert self._loop is not None
        assert self._queue is not None
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (work, future))
        return future.result(timeout)

    def tools(self) -> list[Tool]:
        return list(self._submit(lambda c: c.list_tools(), 60).tools)

    def call(self, name: str, arguments: dict[str, Any], timeout: float = 300) -> CallToolResult:
        """The tool's result; an answer's top-level keys are each declared in the tool's output schema (the
        SDK's client checks their values against it)."""
        result: CallToolResult = self._submit(lambda c: c.call_tool(name, arguments), timeout)
        if not result.is_error and isinstance(result.structured_content, dict):
            undeclared = set(result.structured_content) - set(self.output_schema(name)["properties"])
            assert not undeclared, f"{name} answered keys its output schema does not declare: {undeclared}"
        return result

    def output_schema(self, name: str) -> dict[str, Any]:
        if name not in self._output_schemas:
            self._output_schemas.update({t.name: t.output_schema or {} for t in self.tools()})
        return self._output_schemas[name]

    def stderr(self) -> str:
        return self.stderr_log.read_text(errors="replace") if self.stderr_log.exists() else ""

    def close(self) -> None:
        if self._loop is not None and self._queue is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        self._thread.join(30)


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert block.type == "text"
    return block.text


def without_timings(document: Any) -> Any:
    """The document less its wall-clock fields (``seconds``, ``duration``), which differ between two runs."""
    if isinstance(document, dict):
        return {k: without_timings(v) for k, v in document.items() if k not in ("seconds", "duration")}
    if isinstance(document, list):
        return [without_timings(v) for v in document]
    return document


def report_path(text: str) -> Path:
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("full report (JSON, "), text
    return Path(last.split(": ", 1)[1])


def assert_kept_in_full(text: str, structured: Any) -> None:
    """The summary's last line names a file holding exactly the structured content."""
    path = report_path(text)
    assert json.loads(path.read_text()) == structured
    assert path.name == "report.json"


def start_server(root: Path, args: tuple[str, ...] = SERVER_ARGS) -> McpSession:
    """A server whose runs directory and targets file are under ``root``; the TRAINPROBE_* settings of the
    test process (the sshd fixture's ssh config and control directory) are passed on."""
    (root / "work").mkdir(parents=True, exist_ok=True)
    (root / "targets.toml").write_text(TARGETS_TOML)
    env = {k: v for k, v in os.environ.items() if k.startswith("TRAINPROBE_")}
    env.update(TRAINPROBE_RUNS_DIR=str(root / "runs"), TRAINPROBE_CONFIG=str(root / "targets.toml"))
    return McpSession(env, root / "work", root / "server-stderr.log", args).start()


def world_readable(root: Path) -> Path:
    """The ssh test users read these files through the loopback sshd."""
    root.chmod(0o755)
    for folder, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(os.path.join(folder, d), 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)
    return root


def write_spiky_log(path: Path, steps: int = 200, spike_at: int = 120) -> Path:
    """A plain-text training log (``step: N  loss: X``) whose loss spikes at ``spike_at`` and recovers."""
    lines = []
    for step in range(steps):
        loss = 2.0 - 0.002 * step + 0.01 * math.sin(step)
        lines.append(f"step: {step}  loss: {9.5 if step == spike_at else loss:.4f}")
    path.write_text("\n".join(lines) + "\n")
    return path
