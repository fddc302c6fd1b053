"""Turn a TrainprobeError into one sentence and an exit code; tracebacks only with TRAINPROBE_DEBUG=1."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from trainprobe.cli._output import Output
from trainprobe.errors import TrainprobeError


@contextmanager
def reported_errors(out: Output) -> Iterator[None]:
    """Run a command body; a TrainprobeError becomes one clear line on stderr and its documented exit code."""
    try:
        yield
    except TrainprobeError as exc:
        if os.environ.get("TRAINPROBE_DEBUG"):
            raise
        out.error(str(exc))
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        out.error("interrupted")
        raise typer.Exit(130) from None
