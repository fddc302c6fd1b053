"""The command's two streams at the lowest level: a write that is flushed at once and fails as one error.

A closed pipe raises ``BrokenPipeError`` (the program exits 141); any other failure to write (a full disk) is
:class:`OutputError` (exit 2). :mod:`~trainprobe.cli._output` writes through here, and
:mod:`~trainprobe.cli._errors` decides how each ends the command.
"""

from __future__ import annotations

import sys

from trainprobe.errors import TrainprobeError

TYPE_CHECKING = False  # not typing's: this module is on every path, `trainprobe --version` included
if TYPE_CHECKING:
    from typing import IO


class OutputError(TrainprobeError):
    """Writing the command's own output failed (not a closed pipe: that is ``BrokenPipeError``)."""

    def __init__(self, stream: str, error: OSError) -> None:
        super().__init__(f"cannot write to {stream}: {error.strerror or error}")
        self.stream = stream


def write(stream: IO[str], name: str, text: str) -> None:
    """``text`` to ``stream``, flushed; a failure is ``BrokenPipeError`` or :class:`OutputError`."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(name, exc) from None


def write_stdout(text: str) -> None:
    """Plain text to stdout (help, the version): never through rich, whatever the stream."""
    write(sys.stdout, "stdout", text)


def write_stderr(text: str) -> None:
    write(sys.stderr, "stderr", text)
