"""A fake Kubernetes API server: just the part the real ``kubectl exec -i POD -- CMD`` talks to.

Why a fake: no Kubernetes cluster can run on the test machines (no systemd, no kubelet, no container network),
but the real ``kubectl`` binary can. This server is a real implementation of the two API calls ``kubectl
exec`` makes, so the hop is tested against kubectl's own argument handling, error messages and exit codes:

- ``GET /api/v1/namespaces/NS/pods/POD``: the pod object (phase Running, one container ``main``), or a 404
  ``Status`` (reason NotFound) when the pod is not in ``--pods``; kubectl then prints ``Error from server
  (NotFound): pods "POD" not found``.
- ``GET /api/v1/namespaces/NS/pods/POD/exec?command=..&stdin=true..`` upgraded to a WebSocket with the
  ``v5.channel.k8s.io`` (or v4) subprotocol: every message is one channel byte and data (0 stdin, 1 stdout, 2
  stderr, 3 the final Status, 255 "close channel", which v5 clients send to close stdin). The command runs as
  a local process; a non-zero exit becomes the ``NonZeroExitCode`` Status from which kubectl takes its exit
  code.

A pod is a local process in this fake; ``--pods ns/name,...`` lists the pods that exist. Every exec request is
appended as one JSON line to ``--record FILE`` (namespace, pod, container, command), so tests can check what
kubectl asked for. The WebSocket framing (RFC 6455) is written here with the standard library only.

Run: ``python fake_kube_apiserver.py --pods default/trainer-0 --record log.jsonl``; it prints its port, then
serves on 127.0.0.1 until killed.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SUBPROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


DISCOVERY: dict[str, dict[str, Any]] = {
    "api": {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    },
    "apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "pods",
                "singularName": "pod",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get", "list"],
            },
            {
                "name": "pods/exec",
                "singularName": "",
                "namespaced": True,
                "kind": "PodExecOptions",
                "verbs": ["get"],
            },
        ],
    },
}


def pod_object(namespace: str, name: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "uid": f"fake-{namespace}-{name}"},
        "spec": {"containers": [{"name": "main", "image": "fake"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "main", "ready": True, "state": {"running": {}}}],
        },
    }


def not_found(kind: str, name: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{kind} "{name}" not found',
        "reason": "NotFound",
        "details": {"name": name, "kind": kind},
        "code": 404,
    }


def read_frame(rfile: BinaryIO) -> tuple[int, bytes] | None:
    """One complete message (continuation frames joined), or None at end of stream."""
    opcode = None
    payload = b""
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return None
        fin, op = head[0] & 0x80, head[0] & 0x0F
        masked, length = head[1] & 0x80, head[1] & 0x7F
        if length == 126:
            (length,) = struct.unpack(">H", rfile.read(2))
        elif length == 127:
            (length,) = struct.unpack(">Q", rfile.read(8))
        mask = rfile.read(4) if masked else b""
        data = rfile.read(length)
        if len(data) < length:
            return None
        if masked:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if op >= 0x8:  # control frames may arrive between fragments
            return op, data
        if op != OP_CONT:
            opcode = op
        payload += data
        if fin:
            return (opcode if opcode is not None else OP_BINARY), payload


def frame(opcode: int, data: bytes) -> bytes:
    n = len(data)
    if n < 126:
        head = struct.pack(">BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack(">BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
    return head + data


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass

    def send_json(self, code: int, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if url.path.strip("/") in DISCOVERY:  # kubectl reads these before it resolves "pod"
            self.send_json(200, DISCOVERY[url.path.strip("/")])
            return
        if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 6 or parts[4] != "pods":
            self.send_json(404, not_found("resource", url.path))
            return
        namespace, pod = parts[3], parts[5]
        if (namespace, pod) not in self.server.pods:
            self.send_json(404, not_found("pods", pod))
            return
        if len(parts) == 6:
            self.send_json(200, pod_object(namespace, pod))
            return
        if parts[6:] != ["exec"] or self.headers.get("Upgrade", "").lower() != "websocket":
            message = "this fake API server speaks only WebSocket exec (kubectl >= 1.30), not SPDY"
            self.send_json(400, {"kind": "Status", "status": "Failure", "message": message, "code": 400})
            return
        self.exec_websocket(namespace, pod, parse_qs(url.query))

    def exec_websocket(self, namespace: str, pod: str, query: dict[str, list[str]]) -> None:
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        protocol = next((p for p in SUBPROTOCOLS if p in offered), None)
        if protocol is None:
            self.send_json(
                400, {"kind": "Status", "status": "Failure", "message": "no supported subprotocol"}
            )
            return
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True

        command = query.get("command", [])
        container = query.get("container", ["main"])[0]
        self.server.record({"namespace": namespace, "pod": pod, "container": container, "command": command})
        want_stdin = query.get("stdin", ["false"])[0] == "true"
        send_lock = threading.Lock()

        def send(channel: int, data: bytes) -> None:
            with send_lock:
                self.wfile.write(frame(OP_BINARY, bytes([channel]) + data))

        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE if want_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            send(ERROR, json.dumps({"status": "Failure", "message": f"exec failed: {exc}"}).encode())
            send_close = frame(OP_CLOSE, struct.pack(">H", 1000))
            with send_lock:
                self.wfile.write(send_close)
            return

        def pump(stream: BinaryIO, channel: int) -> None:
            while chunk := stream.read1(65536):  # type: ignore[attr-defined]
                send(channel, chunk)

        pumps = [
            threading.Thread(target=pump, args=(proc.stdout, STDOUT), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, STDERR), daemon=True),
        ]
        for t in pumps:
            t.start()
        threading.Thread(target=self.read_client, args=(proc, send_lock), daemon=True).start()
        for t in pumps:
            t.join()
        code = proc.wait()
        if code == 0:
            status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        else:
            status = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit status {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        send(ERROR, json.dumps(status).encode())
        with send_lock:
            self.wfile.write(frame(OP_CLOSE, struct.pack(">H", 1000)))

    def read_client(self, proc: subprocess.Popen[bytes], send_lock: threading.Lock) -> None:
        def close_stdin() -> None:
            if proc.stdin and not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()

        try:
            while (msg := read_frame(self.rfile)) is not None:
                opcode, data = msg
                if opcode == OP_CLOSE:
                    break
                if opcode == OP_PING:
                    with send_lock:
                        self.wfile.write(frame(OP_PONG, data))
                    continue
                if not data or opcode not in (OP_BINARY, OP_TEXT):
                    continue
                channel, payload = data[0], data[1:]
                if channel == STDIN and proc.stdin and not proc.stdin.closed:
                    proc.stdin.write(payload)
                    proc.stdin.flush()
                elif channel == CLOSE and payload[:1] == bytes([STDIN]):
                    close_stdin()
        except (OSError, ValueError):  # ValueError: the handler finished and closed the stream under us
            pass
        # The client went away: as a kubelet would, end the process.
        close_stdin()
        if proc.poll() is None:
            proc.kill()


class FakeApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pods: set[tuple[str, str]], record_path: str | None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.pods = pods
        self.record_path = record_path
        self._record_lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> None:
        if not self.record_path:
            return
        with self._record_lock, open(self.record_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", default="default/trainer-0", help="NS/NAME,... of the pods that exist")
    parser.add_argument("--record", default=None, help="append each exec request as a JSON line to this file")
    opts = parser.parse_args()
    pods = {tuple(p.split("/", 1)) for p in opts.pods.split(",") if p}
    server = FakeApiServer({(ns, name) for ns, name in pods}, opts.record)
    print(server.server_address[1], flush=True)
    os.close(sys.stdout.fileno())
    server.serve_forever()


if __name__ == "__main__":
    main()
