"""Command-line interface: parses arguments, calls one library function, hands the result to the output sink.

Only this package imports typer and rich.
"""

from __future__ import annotations

from trainprobe.cli import (  # noqa: F401  (each module registers its command on import)
    check,
    demo,
    diff,
    logs,
    probe,
    run,
    scan,
    triage,
    watch,
)
from trainprobe.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
