"""What ``scan``, ``check``, ``diff`` and ``triage`` print about verdicts: their styles and marks, and the
exit codes of :mod:`trainprobe.checkpoint.verdict` in words (that module is not imported here: importing
``trainprobe.checkpoint`` at ``--help`` time would cost numpy; ``tests/cli/test_verdict_help.py`` holds the
two to the same table)."""

from __future__ import annotations

#: each verdict's style and the mark scan, check and diff head a unit with: the one table of every command
#: that shows verdicts (triage too); a finding is bold red, a doubt yellow
_VERDICTS = {
    "clean": ("green", "✓ clean"),
    "consistent": ("green", "✓ consistent"),
    "unknown": ("yellow", "? unknown"),
    "nonfinite": ("bold red", "✗ NON-FINITE"),
    "suspicious": ("bold red", "✗ SUSPICIOUS"),
    "torn": ("bold red", "✗ TORN"),
    "corrupt": ("bold red", "✗ CORRUPT"),
    "unreadable": ("yellow", "! unreadable"),
}
STYLE = {verdict: style for verdict, (style, _) in _VERDICTS.items()}
MARK = {verdict: f"[{style}]{mark}[/]" for verdict, (style, mark) in _VERDICTS.items()}

#: the exit codes every checkpoint command shares (trainprobe.checkpoint.verdict.exit_code); an indented
#: paragraph, so the help keeps it as written
EXIT_CODES = """\
Exit codes, the one rule of scan, check, diff and triage (a unit's verdict is its worst evidence,
and the worst unit decides the code)
  1  a finding: suspicious (a pickle global that would run code on torch.load), nonfinite
     (NaN/Inf in weights, buffers or optimizer state), torn (the checkpoint mixes training steps) or
     corrupt (damaged: a CRC mismatch, truncated, a part missing, an impossible state); a finding
     wins over unreadable
  2  unreadable (could not be judged: missing, not a checkpoint, unsupported) and no finding; or a
     usage error
  0  otherwise: clean, consistent (evidence that could have shown a tear was there and passed), or
     unknown (read and finite, but the evidence that could show a tear is missing or undecided)"""

#: the exit code of every fleet (trainprobe.tasks.FleetReports.exit_code): scan, check, diff and logs --on
FLEET_EXIT_CODES = (
    "With a fleet: 1 if any target found something or could not run (unreachable, failed); else 2 if any "
    "target could not read everything (an unreadable checkpoint or log); else 0."
)
