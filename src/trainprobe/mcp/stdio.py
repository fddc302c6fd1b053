"""The stdio transport: the SDK's own, between a reader that answers malformed requests and a writer that
never dies on a message.

- **Reading.** Each line of stdin is parsed here first. A line that is not UTF-8 JSON is answered with a
  JSON-RPC parse error (-32700, id null); a JSON value that is not a valid JSON-RPC message is answered with
  -32600 (invalid request) or, for a request whose only fault is its ``params``, -32602 (invalid params),
  with the request's id when it has a usable one (else null). A malformed notification or response gets no
  answer (JSON-RPC never answers those). Valid lines go on to the SDK unchanged. (The SDK alone drops a
  malformed request without a word, and the client waits for ever.)
- **Writing.** Every message the SDK sends is serialised here before its writer sees it; a message that
  cannot be (a string the SDK's JSON writer cannot encode) is replaced by a JSON-RPC error (-32603) for the
  same id, so the call is answered and the server stays up. Every line written to stdout — the SDK's and the
  reader's answers — goes through one lock, one whole line per write, so lines never interleave.
- **The wire.** As the SDK does, fd 0 and fd 1 are moved to private descriptors while serving (fd 0 reads
  the null device, fd 1 writes to stderr), so a child process or a stray print never touches the wire.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import ErrorData, JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class Wire:
    """The client's end: lines read from ``stdin`` and whole lines written to ``stdout`` under one lock."""

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.lock = threading.Lock()

    def write_line(self, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")
        if not data.endswith(b"\n"):
            data += b"\n"
        with self.lock:
            self.stdout.write(data)
            self.stdout.flush()


class LineWriter:
    """The ``stdout`` the SDK's writer gets: its ``write(json + "\\n")`` is one whole line."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self.wire.write_line, text)

    async def flush(self) -> None:
        return None


class CheckedLines:
    """The ``stdin`` the SDK's reader iterates: only the lines that are JSON-RPC messages; the others are
    answered here (see the module's docstring)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await anyio.to_thread.run_sync(self.wire.stdin.readline)
            if not raw:
                raise StopAsyncIteration
            line, answer = check_line(raw)
            if answer is not None:
                await anyio.to_thread.run_sync(self.wire.write_line, answer)
            if line is not None:
                return line


def _usable_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def error_line(id_: Any, code: int, message: str) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": id_ if _usable_id(id_) else None,
            "error": {"code": code, "message": message},
        },
        ensure_ascii=True,
    )


def check_line(raw: bytes) -> tuple[str | None, str | None]:
    """(the line for the SDK or None, the answer to write or None) for one line read from stdin."""
    if not raw.strip():
        return None, None
    try:
        text = raw.decode("utf-8")
        value = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        return None, error_line(None, PARSE_ERROR, "parse error: the line is not UTF-8 JSON")
    if isinstance(value, dict) and "id" in value and not _usable_id(value["id"]) and "method" in value:
        # The SDK would take it for a notification (extra keys allowed) and never answer.
        return None, error_line(None, INVALID_REQUEST, 'invalid request: "id" must be a string or an integer')
    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception:
        return None, _invalid(value)
    return text, None


def _invalid(value: Any) -> str | None:
    """The answer to a JSON value that is not a JSON-RPC message (None for a notification or a response)."""
    if not isinstance(value, dict):
        what = "a batch (a JSON array) is not supported" if isinstance(value, list) else "not a JSON object"
        return error_line(None, INVALID_REQUEST, f"invalid request: {what}")
    id_ = value.get("id")
    if "result" in value or "error" in value:
        return None  # a malformed response: JSON-RPC answers none
    if "id" not in value and isinstance(value.get("method"), str):
        return None  # a malformed notification: likewise
    if value.get("jsonrpc") != "2.0":
        return error_line(id_, INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
    if not isinstance(value.get("method"), str):
        return error_line(id_, INVALID_REQUEST, 'invalid request: "method" must be a string')
    if not _usable_id(id_):
        return error_line(None, INVALID_REQUEST, 'invalid request: "id" must be a string or an integer')
    return error_line(id_, INVALID_PARAMS, 'invalid params: "params" must be an object')


class SafeSend:
    """The write stream the SDK's server gets: each message serialised first; one that cannot be is replaced
    by an error for its id (or dropped, with a line on stderr, when it has none)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def send(self, item: SessionMessage) -> None:
        message = checked(item)
        if message is not None:
            await self.stream.send(message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    async def __aenter__(self) -> SafeSend:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self.stream.__aexit__(*exc)
        return result


def checked(item: SessionMessage) -> SessionMessage | None:
    """``item`` when it serialises; else an error answer for its id, or None (with a line on stderr)."""
    try:
        item.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
        return item
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}".encode("ascii", "backslashreplace").decode()[:500]
    message = item.message
    if isinstance(message, (JSONRPCResponse, JSONRPCError)) and message.id is not None:
        error = ErrorData(code=INTERNAL_ERROR, message=f"the answer could not be sent: {problem}")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error), metadata=item.metadata)
    sys.stderr.write(f"trainprobe mcp: a message could not be sent and was dropped: {problem}\n")
    return None


def private_wire() -> tuple[Wire, Callable[[], None]]:
    """The wire on private descriptors; fd 0 reads the null device and fd 1 writes to stderr until the
    returned function puts them back."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)

    return Wire(os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)), restore


async def serve(server: Any) -> None:
    """Serve ``server`` (an :class:`mcp.server.mcpserver.MCPServer`) over this process's stdin and stdout
    until the client closes them."""
    wire, restore = private_wire()
    lowlevel = server._lowlevel_server  # the SDK's run_stdio_async does the same with its own transport
    try:
        async with stdio_server(stdin=CheckedLines(wire), stdout=LineWriter(wire)) as (read, write):  # type: ignore[arg-type]
            await lowlevel.run(read, SafeSend(write), lowlevel.create_initialization_options())
    finally:
        restore()
