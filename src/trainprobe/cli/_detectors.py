"""The log detectors' options, one declaration for ``logs``, ``watch`` and ``triage`` (and ``--fail-on``'s
choices for the two that have it), and how a finding's severity is shown."""

from __future__ import annotations

from typing import Any, Literal

from trainprobe.cli._command import at_least, non_negative_seconds, positive_number
from trainprobe.conventions import MAX_LOGS

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


#: every detector option: flag -> its argparse keywords, in the order --help lists them (one list shared as
#: --event's default is safe: argparse copies an append's default before it appends)
_DETECTOR_OPTIONS: dict[str, dict[str, Any]] = {
    "--event": {
        "action": "append", "default": [], "metavar": "REGEX",
        "help": "Log lines matching REGEX are events (repeatable).",
    },
    "--threshold": {
        "type": positive_number, "default": 6.0, "metavar": "Z",
        "help": "Spike threshold, a modified z-score (default: %(default)g).",
    },
    "--window": {
        "type": at_least(5), "default": 50, "metavar": "ROWS",
        "help": "Rows in the trailing window for median/MAD baselines, at least 5 (default: %(default)s).",
    },
    "--stall-factor": {
        "type": positive_number, "default": 5.0, "metavar": "X",
        "help": "A stall is a gap ≥ X × the usual one... (default: %(default)g)",
    },
    "--stall-floor": {
        "type": non_negative_seconds, "default": 10.0, "metavar": "SECONDS",
        "help": "...and at least this many seconds (default: %(default)g).",
    },
}  # fmt: skip
#: the options each ``stall`` choice of :func:`add_detector_options` takes
_STALL_OPTIONS = {
    "all": tuple(_DETECTOR_OPTIONS),
    "floor": ("--event", "--threshold", "--stall-floor"),
    "none": ("--event", "--threshold"),
}
#: --stall-floor's help where it stands alone (no --stall-factor before it to finish the sentence)
_STALL_FLOOR_ALONE = "Shortest gap in logging that counts as a stall (default: %(default)g)."


def add_detector_options(group: Any, *, stall: Literal["all", "floor", "none"] = "all") -> None:
    """--event and --threshold; ``stall``: "all" --window, --stall-factor and --stall-floor (logs), "floor"
    --stall-floor alone (triage), "none" (watch)."""
    for flag in _STALL_OPTIONS[stall]:
        keywords = _DETECTOR_OPTIONS[flag]
        if flag == "--stall-floor" and stall == "floor":
            keywords = {**keywords, "help": _STALL_FLOOR_ALONE}
        group.add_argument(flag, **keywords)


def add_max_logs(group: Any) -> None:
    """--max-logs (logs and triage: the one bound on the log files a command reads)."""
    group.add_argument(
        "--max-logs", type=at_least(0), default=MAX_LOGS, metavar="N",
        help="Read at most N log files (a W&B or MLflow run counts as one; default: %(default)s; 0: every "
        "one). Those past N are reported as not read (exit 2), never skipped silently.",
    )  # fmt: skip
