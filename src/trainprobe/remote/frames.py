"""The wire between the local side and the far side's agent: frame kinds, the writer of the far side's stdin
(frames once stage 1 said hello, then heartbeats) and the parser of its stdout (noise before the magic, then
frames of known kinds and sizes). :mod:`trainprobe.remote.session` runs them; nothing here starts a process.
"""

from __future__ import annotations

import contextlib
import threading

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

# The far side's words (trainprobe.remote._stage1 and .agent say them; a test checks both ends agree). Not
# imported from there: the agent is the far side's code, shipped as text.
MAGIC = b"\n\x00TRAINPROBE-AGENT-1\x00"
HELLO, NOT_FOUND, READY, STDOUT, STDERR, EXIT = b"H", b"F", b"R", b"1", b"2", b"X"
HEARTBEAT_FRAME = b"B\0\0\0\0"
#: the biggest frame the far side may send (an exit report holding main()'s value); more means corruption
MAX_FRAME = 1 << 30

#: seconds between heartbeats to the agent (it kills the run after run_errors.LINK_LOST_S without one)
HEARTBEAT_S = 2.0


def frame(kind: bytes, data: bytes) -> bytes:
    return kind + len(data).to_bytes(4, "big") + data


class Feeder(threading.Thread):
    """Writes the frames once stage 1 said hello (``payload(far_magic)`` builds them for the far Python's
    bytecode), then a heartbeat every HEARTBEAT_S until told to stop; then closes the far side's stdin."""

    def __init__(self, pipe: IO[bytes], payload: Callable[[bytes], bytes]) -> None:
        super().__init__(daemon=True, name="trainprobe-feed")
        self.pipe = pipe
        self.payload = payload
        self.hello = threading.Event()
        self.far_magic = b""
        self.closing = threading.Event()

    def said_hello(self, far_magic: bytes) -> None:
        self.far_magic = far_magic
        self.hello.set()

    def run(self) -> None:
        try:
            while not self.hello.wait(0.5):
                if self.closing.is_set():
                    return
            if not self.closing.is_set():
                self.pipe.write(self.payload(self.far_magic))
                self.pipe.flush()
                while not self.closing.wait(HEARTBEAT_S):
                    self.pipe.write(HEARTBEAT_FRAME)
                    self.pipe.flush()
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                self.pipe.close()

    def stop(self) -> None:
        self.closing.set()


class StreamCorrupted(Exception):
    """A frame from the far side with an unknown kind or an impossible size."""


class FrameParser:
    """Incremental parser of the far side's stdout: noise before the magic, then frames."""

    KINDS = frozenset((HELLO, NOT_FOUND, READY, STDOUT, STDERR, EXIT))

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.started = False
        self.noise = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self.buffer += data
        if not self.started:
            at = self.buffer.find(MAGIC)
            if at < 0:
                keep = len(MAGIC) - 1
                if len(self.buffer) > keep:
                    self.noise += self.buffer[:-keep]
                    del self.buffer[:-keep]
                return []
            self.noise += self.buffer[:at]
            del self.buffer[: at + len(MAGIC)]
            self.started = True
        frames = []
        while len(self.buffer) >= 5:
            kind = bytes(self.buffer[:1])
            size = int.from_bytes(self.buffer[1:5], "big")
            if kind not in self.KINDS or size > MAX_FRAME:
                raise StreamCorrupted(f"frame {bytes(self.buffer[:5])!r}")
            if len(self.buffer) < 5 + size:
                break
            frames.append((kind, bytes(self.buffer[5 : 5 + size])))
            del self.buffer[: 5 + size]
        return frames

    def before_agent(self) -> bytes:
        """Everything the far side wrote before the agent's magic (login scripts), the last bytes too."""
        return bytes(self.noise) + (b"" if self.started else bytes(self.buffer))


__all__ = ["HEARTBEAT_S", "MAGIC", "Feeder", "FrameParser", "StreamCorrupted", "frame"]
