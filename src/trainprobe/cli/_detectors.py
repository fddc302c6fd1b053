"""The log detectors' options, one declaration for ``logs``, ``watch`` and ``triage`` (and ``--fail-on``'s
choices for the two that have it), and how a finding's severity is shown."""

from __future__ import annotations

from typing import Any, Literal

from trainprobe.cli._command import at_least, non_negative_seconds, positive_number

#: --fail-on's choices, most severe first
FAIL_ON = ("error", "warning", "info", "never")
#: how logs and watch show a finding's severity
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def add_fail_on(group: Any, *, when: str) -> None:
    """--fail-on (``when``: "" or " at the end")."""
    group.add_argument(
        "--fail-on", choices=FAIL_ON, default="error", metavar="|".join(FAIL_ON),
        help=f"Exit 1{when} when a finding is at least this severe (default: %(default)s).",
    )  # fmt: skip


def add_detector_options(group: Any, *, stall: Literal["all", "floor", "none"] = "all") -> None:
    """--event and --threshold; ``stall``: "all" --window, --stall-factor and --stall-floor (logs), "floor"
    --stall-floor alone (triage), "none" (watch)."""
    add = group.add_argument
    add(
        "--event", action="append", default=[], metavar="REGEX",
        help="Log lines matching REGEX are events (repeatable).",
    )  # fmt: skip
    add(
        "--threshold", type=positive_number, default=6.0, metavar="Z",
        help="Spike threshold, a modified z-score (default: %(default)g).",
    )  # fmt: skip
    if stall == "all":
        add(
            "--window", type=at_least(5), default=50, metavar="ROWS",
            help="Rows in the trailing window for median/MAD baselines, at least 5 (default: %(default)s).",
        )  # fmt: skip
        add(
            "--stall-factor", type=positive_number, default=5.0, metavar="X",
            help="A stall is a gap ≥ X × the usual one... (default: %(default)g)",
        )  # fmt: skip
    if stall != "none":
        add(
            "--stall-floor", type=non_negative_seconds, default=10.0, metavar="SECONDS",
            help="...and at least this many seconds (default: %(default)g)." if stall == "all"
            else "Shortest gap in logging that counts as a stall (default: %(default)g).",
        )  # fmt: skip
