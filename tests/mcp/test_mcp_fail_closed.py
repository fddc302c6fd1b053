"""The server fails closed: it answers every request and stays up whatever a document holds, what reaches
an agent's UI is inert, read-only tools run no interpreter the client names, and malformed JSON-RPC
requests get JSON-RPC errors. Through the SDK's client over stdio, and raw stdio for what a client would not
send."""

from __future__ import annotations

import json
import os
import queue
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import McpSession, text_of

from trainprobe.mcp.safe import sendable, shown
from trainprobe.mcp.stdio import check_line, checked

ESC_NAME = "w\x1b]0;pwned\x07\x1b[2K\u202e"  # a window title, an erased line, a bidi override


def write_safetensors(path: str | bytes, tensors: dict[str, list[float]]) -> None:
    """A float32 safetensors file, written by hand (no torch): ``tensors`` maps names to values."""
    header: dict[str, Any] = {}
    data = b""
    for name, values in tensors.items():
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {
            "dtype": "F32",
            "shape": [len(values)],
            "data_offsets": [len(data), len(data) + len(blob)],
        }
        data += blob
    head = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head + data)


def assert_still_up(session: McpSession, tmp_path: Path) -> None:
    """A following ordinary call is answered."""
    clean = tmp_path / "after.safetensors"
    write_safetensors(str(clean), {"w": [1.0, 2.0]})
    result = session.call("scan", {"paths": [str(clean)]}, timeout=120)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["verdict"] == "clean"


def inert(text: str) -> None:
    """No control character other than the summary's own newlines, no bidi control, no lone surrogate."""
    bad = [c for c in text if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
    bad += [c for c in text if 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069]
    bad += [c for c in text if 0xD800 <= ord(c) <= 0xDFFF]
    assert not bad, (bad, text)


# -- a document the SDK's writer could not send --------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_answered_escaped(server: McpSession, tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path / "odd")
    os.mkdir(folder)
    write_safetensors(os.path.join(folder, b"bad\xff.safetensors"), {"w": [float("nan"), 1.0]})
    result = server.call("scan", {"paths": [str(tmp_path / "odd")]}, timeout=120)
    doc = result.structured_content
    assert doc is not None, text_of(result)
    paths = [f["path"] for f in doc["files"]]
    assert paths == [str(tmp_path / "odd" / "bad\\xff.safetensors")]  # the byte, as the text \xff
    assert "bad\\xff.safetensors" in text_of(result)
    inert(text_of(result))
    assert_still_up(server, tmp_path)


def test_a_log_key_with_a_lone_surrogate_is_answered(server: McpSession, tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    rows = [f'{{"step": {i}, "loss": {2.0 - i / 100}, "lr\\ud800": 0.1}}' for i in range(40)]
    log.write_text("\n".join(rows) + "\n")
    result = server.call("logs", {"paths": [str(log)]}, timeout=120)
    text = text_of(result)  # answered: a report, or an error result if the reader rejects the key
    inert(text)
    json.dumps(result.structured_content, ensure_ascii=False).encode("utf-8")  # no lone surrogate left
    assert_still_up(server, tmp_path)


def test_control_characters_in_data_reach_the_summary_escaped(server: McpSession, tmp_path: Path) -> None:
    folder = tmp_path / "ctl"
    folder.mkdir()
    name = folder / "evil\n✓ clean.safetensors"
    write_safetensors(str(name), {ESC_NAME: [float("inf"), 0.0]})
    result = server.call("scan", {"paths": [str(folder)]}, timeout=120)
    text = text_of(result)
    inert(text)
    assert "w\\x1b]0;pwned\\x07\\x1b[2K\\u202e" in text
    assert "evil\\n✓ clean.safetensors" in text
    assert not any(line.startswith("✓ clean") for line in text.splitlines())
    doc = result.structured_content
    assert doc is not None
    assert doc["files"][0]["path"] == str(name)  # the structured content keeps the data as it is
    assert doc["files"][0]["tensors"][0]["name"] == ESC_NAME


def test_sendable_escapes_surrogates_and_nulls_nonfinite_numbers() -> None:
    doc = {"a\udcff": [float("nan"), float("inf"), -float("inf"), 1.5, ("x\ud800",)], "n": None, "b": True}
    assert sendable(doc) == {"a\\xff": [None, None, None, 1.5, ["x\\ud800"]], "n": None, "b": True}
    assert shown({"k\x1b": ["a\nb", 3]}) == {"k\\x1b": ["a\\nb", 3]}


def test_a_message_that_cannot_be_sent_becomes_an_error_for_its_id() -> None:
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError, JSONRPCResponse

    bad = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=3, result={"x": "\udcff"}))
    replaced = checked(bad)
    assert replaced is not None
    assert isinstance(replaced.message, JSONRPCError)
    assert replaced.message.id == 3
    assert replaced.message.error.code == -32603
    good = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=4, result={"x": "ok"}))
    assert checked(good) is good


# -- read-only tools and interpreter settings ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("scan", {"paths": ["x.pt"]}),
        ("check", {"paths": ["x.pt"]}),
        ("logs", {"paths": ["x.log"]}),
        ("diff", {"a": "a.pt", "b": "b.pt"}),
        ("triage", {"run_dir": "run"}),
        ("watch_tail", {"path": "x.log"}),
        ("probe", {"cuda": False}),
    ],
)
@pytest.mark.parametrize(
    "setting", ["python=./anything", "venv=/tmp/v", "conda=base", "env=LD_PRELOAD=/x.so"]
)
def test_read_only_tools_refuse_interpreter_settings(
    server: McpSession, tmp_path: Path, tool: str, arguments: dict[str, Any], setting: str
) -> None:
    marker = tmp_path / "ran"
    result = server.call(tool, {**arguments, "target": f"local//{setting}"}, timeout=120)
    assert result.is_error
    text = text_of(result)
    assert text.startswith(f"{tool} is read-only and does not take interpreter settings ({setting})")
    assert "--allow-interpreters" in text
    assert result.structured_content is None
    assert not marker.exists()


def test_a_range_with_an_interpreter_setting_is_refused_too(server: McpSession) -> None:
    result = server.call("probe", {"target": "ssh=node[1-2]//python=/tmp/x", "cuda": False})
    assert result.is_error
    assert "python=/tmp/x" in text_of(result)


def test_the_refusal_runs_nothing(server: McpSession, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    program = tmp_path / "fake-python"
    program.write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    program.chmod(0o755)
    result = server.call("scan", {"paths": [str(tmp_path)], "target": f"local//python={program}"})
    assert result.is_error
    assert not marker.exists()
    assert_still_up(server, tmp_path)


def test_run_takes_interpreter_settings(server: McpSession) -> None:
    result = server.call(
        "run", {"script": "def main():\n    return 7\n", "target": f"local//python={sys.executable}"}
    )
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["result"] == 7


def test_a_server_started_allowing_interpreters_takes_them(allowing: McpSession, tmp_path: Path) -> None:
    ckpt = tmp_path / "w.safetensors"
    write_safetensors(str(ckpt), {"w": [1.0]})
    result = allowing.call("scan", {"paths": [str(ckpt)], "target": f"local//python={sys.executable}"})
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["verdict"] == "clean"


def test_help_names_the_flag() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "mcp", "--help"], capture_output=True, text=True, check=True
    )
    assert "--allow-interpreters" in proc.stdout


# -- malformed JSON-RPC over raw stdio -----------------------------------------------------------------------


def test_check_line_answers_what_the_sdk_would_drop() -> None:
    def answer(line: bytes) -> Any:
        passed, reply = check_line(line)
        assert passed is None
        return None if reply is None else json.loads(reply)

    assert answer(b"not json\n") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": answer(b"{")["error"]["message"]},
    }
    assert answer(b"\xff\xfe\n")["error"]["code"] == -32700
    assert answer(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}')["error"]["code"] == -32602
    assert answer(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}')["id"] == 7
    assert answer(b'{"jsonrpc":"1.0","id":"a","method":"ping"}')["id"] == "a"
    assert answer(b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}') == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": 'invalid request: "id" must be a string or an integer'},
    }
    assert answer(b"[1, 2]")["error"]["code"] == -32600
    assert answer(b'{"jsonrpc":"2.0","method":"notifications/x","params":3}') is None  # a notification
    assert answer(b'{"jsonrpc":"2.0","id":1,"result":3}') is None  # a response
    assert check_line(b"  \n") == (None, None)
    assert check_line(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')[0] is not None


class RawServer:
    """``python -m trainprobe.mcp`` driven line by line."""

    def __init__(self, root: Path) -> None:
        env = {
            **os.environ,
            "TRAINPROBE_RUNS_DIR": str(root / "runs"),
            "TRAINPROBE_CONFIG": str(root / "none.toml"),
        }
        self.stderr = open(root / "stderr.log", "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainprobe.mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=root,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: bytes | str | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = (
            json.dumps(line).encode()
            if isinstance(line, dict)
            else line.encode()
            if isinstance(line, str)
            else line
        )
        self.proc.stdin.write(data.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.lines.get(timeout=timeout))
        return message

    def request(self, id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        while True:
            message = self.receive(300)
            if message.get("id") == id_:
                return message

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_malformed_requests_get_jsonrpc_errors_and_the_server_stays_up(tmp_path: Path) -> None:
    from mcp.types import LATEST_PROTOCOL_VERSION

    raw = RawServer(tmp_path)
    try:
        init = raw.request(
            1,
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        assert "result" in init, init
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        raw.send("this is not json")
        assert raw.receive() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "parse error: the line is not UTF-8 JSON"},
        }
        raw.send(b'{"jsonrpc": "2.0", "id": "\xff"}')
        assert raw.receive()["error"]["code"] == -32700
        raw.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": ["scan"]})
        reply = raw.receive()
        assert (reply["id"], reply["error"]["code"]) == (5, -32602)
        raw.send({"jsonrpc": "2.0", "id": 6})
        reply = raw.receive()
        assert (reply["id"], reply["error"]["code"]) == (6, -32600)
        raw.send({"id": 7, "method": "ping"})
        reply = raw.receive()
        assert (reply["id"], reply["error"]["code"]) == (7, -32600)
        raw.send("[]")
        reply = raw.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)

        ckpt = tmp_path / "w.safetensors"
        write_safetensors(str(ckpt), {"w": [float("nan")]})
        reply = raw.request(8, "tools/call", {"name": "scan", "arguments": {"paths": [str(ckpt)]}})
        assert reply["result"]["structuredContent"]["verdict"] == "nonfinite", reply
        assert raw.request(9, "ping", {}) == {"jsonrpc": "2.0", "id": 9, "result": {}}
    finally:
        raw.close()
    assert raw.proc.returncode == 0


# -- in process: whatever the work does, the answer is a result ----------------------------------------------


def test_an_unexpected_exception_is_an_error_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from trainprobe.mcp.answer import answer
    from trainprobe.mcp.tools import tool

    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path))

    def boom() -> dict[str, Any]:
        raise RuntimeError("bad \udcff\x1b[2J")

    result = answer(tool("scan"), boom)
    assert result.is_error
    assert (
        text_of(result)
        == "scan failed: RuntimeError: bad \\xff\\x1b[2J (a bug in trainprobe: please report it)"
    )
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert answer(tool("scan"), lambda: {"files": deep}).is_error  # RecursionError: still a result


def test_a_document_is_kept_and_sent_as_sendable_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from trainprobe.mcp.answer import answer
    from trainprobe.mcp.tools import tool

    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path))
    doc = {"verdict": "clean", "files": [{"path": "a\udcff\n.pt", "verdict": "clean", "x": float("nan")}]}
    result = answer(tool("scan"), lambda: doc)
    assert not result.is_error
    assert result.structured_content == {
        "verdict": "clean",
        "files": [{"path": "a\\xff\n.pt", "verdict": "clean", "x": None}],
    }
    text = text_of(result)
    inert(text)
    assert "every file clean: a\\xff\\n.pt" in text
    result.model_dump_json().encode("utf-8")


def test_watch_tail_does_not_wait_on_a_fifo(server: McpSession, tmp_path: Path) -> None:
    fifo = tmp_path / "stuck.log"
    os.mkfifo(fifo)
    result = server.call("watch_tail", {"path": str(fifo), "timeout_s": 60}, timeout=90)
    assert result.is_error
    assert "not a regular file" in text_of(result)
