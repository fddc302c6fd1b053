"""Stage 1 of the far side: say hello, choose the interpreter, start the agent. Small on purpose.

Runs under whatever Python the bootstrap found first (3.7 or newer), from ``python -c BOOT STAGE1 CONFIG``
where STAGE1 is this file zlib-compressed and base64-encoded (the safe alphabet, so it survives any login
shell) and CONFIG is the base64 of a :mod:`marshal`-ed dict: the setting hops and ``--need``. Only built-in
modules. It is compiled on every run, so everything else comes over stdin, as code objects when the far
Python's bytecode matches the local one's (compiling the discovery and the agent from source cost a run more
than its own Python start-up), else as source.

1. Say hello at once: the magic line and an ``H`` frame holding this interpreter's bytecode magic number. The
   local side writes nothing to stdin before it: a login script that reads stdin would otherwise eat the
   frames (or a shell that an rc file ``exec``-s would run them as commands).
2. Read the ``D`` frame (interpreter discovery, :mod:`trainprobe.remote._discovery`) and choose the
   interpreter. If that is not this one, ``exec`` it with the same stage 1 and ``chosen`` set; it says no
   second hello and goes on at step 3 (the next frame waits in the pipe).
3. Read the ``A`` frame (the agent) and start it. Frames are read with ``os.read`` loops, which never read
   ahead into a buffer, and each frame's kind and size are checked: a wrong one means the stream was
   corrupted.

A program frame is ``magic(4) codelen(4) zlib(marshal(code)) zlib(source)``: the code is used when ``magic``
is this interpreter's, else the source is compiled (the agent always carries its source: an ``exec``-ed
interpreter may be another version than the one that said hello).
"""

from __future__ import annotations

import binascii
import marshal
import os
import sys
import zlib

MAGIC = b"\n\x00TRAINPROBE-AGENT-1\x00"
#: a program frame is a few tens of kB; a header claiming more means the stream is not ours
MAX_PROGRAM_BYTES = 1 << 22
PYC_MAGIC = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def read_exact(n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(0, min(n, 1 << 20))
        if not chunk:
            raise EOFError("stdin closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def fail(message: str, tried: list, error: str = "interpreter", code: int = 127) -> None:  # type: ignore[type-arg]
    import json  # only on this path: json imports re

    data = json.dumps({"error": error, "message": message, "tried": tried}).encode()
    write_all(b"F" + len(data).to_bytes(4, "big") + data)
    os._exit(code)


def read_program(kind: bytes, filename: str) -> object:
    header = read_exact(5)
    size = int.from_bytes(header[1:], "big")
    if header[:1] != kind or size > MAX_PROGRAM_BYTES:
        fail("the stream from the local side was corrupted before the agent started (a login script read "
             "stdin?)", [], "corrupt", 2)  # fmt: skip
    data = read_exact(size)
    codelen = int.from_bytes(data[4:8], "big")
    if codelen and data[:4] == PYC_MAGIC:
        return marshal.loads(zlib.decompress(data[8 : 8 + codelen]))
    return compile(zlib.decompress(data[8 + codelen :]), filename, "exec")


def main() -> None:
    cfg = marshal.loads(binascii.a2b_base64(sys.argv[2]))
    try:
        if not cfg.get("chosen"):
            write_all(MAGIC + b"H" + len(PYC_MAGIC).to_bytes(4, "big") + PYC_MAGIC)
            discovery = {"__name__": "trainprobe_discovery"}
            exec(read_program(b"D", "<trainprobe-discovery>"), discovery)  # type: ignore[arg-type]
            try:
                python = discovery["choose"](cfg)  # type: ignore[operator]
            except discovery["NoInterpreter"] as exc:  # type: ignore[misc]
                fail(exc.message, exc.tried)
            identity = discovery["identity"]
            if identity(python) != identity(sys.executable):  # type: ignore[operator]
                cfg["chosen"] = True
                encoded = binascii.b2a_base64(marshal.dumps(cfg, 4), newline=False).decode()
                os.execv(python, [python, "-c", cfg["boot"], sys.argv[1], encoded])
        agent = {"__name__": "trainprobe_agent"}
        exec(read_program(b"A", "<trainprobe-agent>"), agent)  # type: ignore[arg-type]
    except EOFError:  # the local side gave up (connect timeout, Ctrl-C) before sending everything
        os._exit(1)
    agent["serve"](cfg)  # type: ignore[operator]
    # Everything went out with os.write and the exit report is sent: skip the interpreter's shutdown, which
    # the local side (and ssh) would otherwise wait for on every run.
    os._exit(0)


def __getattr__(name: str) -> object:
    """Locally only: discovery's names (``identity``...) moved to :mod:`trainprobe.remote._discovery`."""
    from trainprobe.remote import _discovery

    return getattr(_discovery, name)


if __name__ == "__main__":  # under python -c
    main()
