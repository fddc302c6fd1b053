"""Stage 1 of the far side, in argv: say hello, run the discovery, start the agent. Compiled on every run,
so only what must be here is (each hundred lines cost the far side half a millisecond).

Runs under whatever Python the bootstrap found first (3.7 or newer), from ``python -c BOOT STAGE1 CONFIG``
(STAGE1: this file, zlib and base64; CONFIG: base64 of a :mod:`marshal`-ed dict of the setting hops and
``--need``; both in the safe alphabet). Only built-in modules. Discovery and the agent come over stdin, as
code objects when the hello's bytecode magic number is the local Python's, else as source.

1. Say hello: the magic line and an ``H`` frame holding this interpreter's bytecode magic number. The local
   side writes nothing to stdin before it (a login script that reads stdin would eat the frames).
2. Read and run the ``D`` frame (:mod:`trainprobe.remote._discovery`): its ``start`` returns when this
   interpreter is the one to run the agent, else ``exec``-s the chosen one with this stage 1 and ``chosen``
   set (which says no second hello and starts at step 3: the next frame waits in the pipe), or reports that
   there is none.
3. Read the ``A`` frame (the agent; it always carries its source, for an ``exec``-ed interpreter of another
   version) and serve.

Frames are read with ``os.read`` loops, which never read ahead; a frame of the wrong kind or an impossible
size means the stream was corrupted (an ``F`` frame says so).
"""

import binascii
import marshal
import os
import sys
import zlib

MAGIC = b"\n\x00TRAINPROBE-AGENT-1\x00"
PYC_MAGIC = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
CORRUPT = (b'{"error":"corrupt","tried":[],"message":"the stream from the local side was corrupted before '
           b'the agent started (a login script read stdin?)"}')  # fmt: skip


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


def read_program(kind: bytes, filename: str) -> object:
    """A program frame: ``magic codelen zlib(marshal(code)) zlib(source)``; the code if the magic is ours."""
    header = read_exact(5)
    size = int.from_bytes(header[1:], "big")
    if header[:1] != kind or size > 1 << 22:  # a program is tens of kB
        write_all(b"F" + len(CORRUPT).to_bytes(4, "big") + CORRUPT)
        os._exit(2)
    data = read_exact(size)
    codelen = int.from_bytes(data[4:8], "big")
    if codelen and data[:4] == PYC_MAGIC:
        return marshal.loads(zlib.decompress(data[8 : 8 + codelen]))
    return compile(zlib.decompress(data[8 + codelen :]), filename, "exec")


def too_old(chosen: bool) -> None:
    """This Python is older than 3.7 (the agent's floor): an ``F`` frame that says so, exit 127. The magic
    line first unless an earlier interpreter (the one that chose this one) has sent it."""
    found = sys.executable + " is Python " + sys.version.split()[0]
    found += "; trainprobe's agent needs Python 3.7 or newer"
    text = found.replace("\\", "\\\\").replace('"', '\\"')  # a JSON string; json is not imported here
    data = ('{"error":"old","tried":[],"message":"' + text + '"}').encode()
    write_all(b"" if chosen else MAGIC)
    write_all(b"F" + len(data).to_bytes(4, "big") + data)
    os._exit(127)


def main() -> None:
    cfg = marshal.loads(binascii.a2b_base64(sys.argv[2]))
    if sys.version_info < (3, 7):  # noqa: UP036 -- the far side's Python, not this project's
        too_old(bool(cfg.get("chosen")))
    try:
        if not cfg.get("chosen"):
            write_all(MAGIC + b"H" + len(PYC_MAGIC).to_bytes(4, "big") + PYC_MAGIC)
            discovery = {"__name__": "trainprobe_discovery"}
            exec(read_program(b"D", "<trainprobe-discovery>"), discovery)  # type: ignore[arg-type]
            discovery["start"](cfg, sys.argv[1])  # type: ignore[operator]
        agent = {"__name__": "trainprobe_agent"}
        exec(read_program(b"A", "<trainprobe-agent>"), agent)  # type: ignore[arg-type]
    except EOFError:  # the local side gave up (connect timeout, Ctrl-C) before sending everything
        os._exit(1)
    agent["serve"](cfg, read_exact)  # type: ignore[operator]
    # Everything went out with os.write and the exit report is sent: skip the interpreter's shutdown, which
    # the local side (and ssh) would otherwise wait for on every run.
    os._exit(0)


def __getattr__(name: str) -> object:
    """Locally only: discovery's names (``identity``...) live in :mod:`trainprobe.remote._discovery`."""
    from trainprobe.remote import _discovery

    return getattr(_discovery, name)


if __name__ == "__main__":  # under python -c
    main()
