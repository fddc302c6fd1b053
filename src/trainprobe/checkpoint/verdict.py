"""The one verdict vocabulary and the one exit-code rule of ``scan``, ``check``, ``diff`` and ``triage``.

A unit's headline is its worst evidence; a report's exit code is decided by its worst headline:

==============  ====  =====================================================================================
verdict         exit  meaning
==============  ====  =====================================================================================
``suspicious``  1     a pickle names a global that would run code on ``torch.load`` (it is named)
``nonfinite``   1     NaN/Inf in weights, buffers or optimizer state
``torn``        1     the unit mixes training steps (counters, Adam bound, master copies, step sources;
                      never a name or a folder: those are labels)
``corrupt``     1     damaged: a CRC32 mismatch, truncated ("truncated at byte N of M"), a record or shard
                      missing, a header that lies, an impossible optimizer state
``unreadable``  2     could not be judged: missing, not a checkpoint, a format or feature not supported
``unknown``     0     read and finite, but the evidence that could show a tear is missing or could not
                      decide (no optimizer state, no step counters, counters behind the step with nothing
                      to explain it, an optimizer family not known for certain) (``check --strict``: 1)
``consistent``  0     positive evidence of one consistent snapshot: evidence that could have shown a tear
                      was there and passed (``check``)
``clean``       0     read, finite, nothing suspicious (``scan``, which does not judge consistency)
==============  ====  =====================================================================================

Exit 1 (a finding) wins over exit 2: a report that found something says so even if another unit could not be
read. Notes (a pickled config class, an ``inf`` in a callback's score) never change a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Verdict = Literal[
    "suspicious", "nonfinite", "torn", "corrupt", "unreadable", "unknown", "consistent", "clean"
]

SUSPICIOUS: Verdict = "suspicious"
NONFINITE: Verdict = "nonfinite"
TORN: Verdict = "torn"
CORRUPT: Verdict = "corrupt"
UNREADABLE: Verdict = "unreadable"
UNKNOWN: Verdict = "unknown"
CONSISTENT: Verdict = "consistent"
CLEAN: Verdict = "clean"

#: Worst first.
ORDER: tuple[Verdict, ...] = (SUSPICIOUS, NONFINITE, TORN, CORRUPT, UNREADABLE, UNKNOWN, CONSISTENT, CLEAN)
FINDINGS: frozenset[str] = frozenset({SUSPICIOUS, NONFINITE, TORN, CORRUPT})
HEALTHY: frozenset[str] = frozenset({CONSISTENT, CLEAN})
_RANK = {v: i for i, v in enumerate(ORDER)}

#: What each verdict means, in one line (the table above, for ``--help`` and reports).
MEANING: dict[str, str] = {
    SUSPICIOUS: "a pickle names a global that would run code on torch.load",
    NONFINITE: "NaN/Inf in weights, buffers or optimizer state",
    TORN: "the checkpoint mixes training steps",
    CORRUPT: "damaged: CRC mismatch, truncated, a part missing, an impossible state",
    UNREADABLE: "could not be judged: missing, not a checkpoint, unsupported",
    UNKNOWN: "read and finite, but the evidence that could show a tear is missing or undecided",
    CONSISTENT: "one consistent snapshot: evidence that could have shown a tear was there and passed",
    CLEAN: "read, finite, nothing suspicious",
}


def worst(verdicts: Iterable[str], default: Verdict = CLEAN) -> Verdict:
    """The worst of ``verdicts`` (by :data:`ORDER`), or ``default`` when there are none."""
    found = [v for v in verdicts if v in _RANK]
    if not found:
        return default
    return ORDER[min(_RANK[v] for v in found)]


def counts(verdicts: Iterable[str]) -> dict[str, int]:
    """Verdict -> how many units have it, in the order first seen: the ``summary`` of scan, check and triage
    (docs/json.md)."""
    found: dict[str, int] = {}
    for v in verdicts:
        found[v] = found.get(v, 0) + 1
    return found


def exit_code(verdicts: Iterable[str], *, strict: bool = False) -> int:
    """1 when any verdict is a finding (or ``unknown`` with ``strict``); else 2 when one is unreadable;
    else 0."""
    seen = set(verdicts)
    if seen & FINDINGS or (strict and UNKNOWN in seen):
        return 1
    if UNREADABLE in seen:
        return 2
    return 0


def is_finding(verdict: str) -> bool:
    return verdict in FINDINGS
