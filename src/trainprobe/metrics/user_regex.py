"""Regular expressions the user gives (``--pattern``, ``--event``), checked so that no line makes one run
without bound.

Python's ``re`` backtracks, and has no time limit: ``(a+)+$`` on 30 ``a`` and a ``b`` takes minutes. So a
user regex is refused when it has the shape that backtracks exponentially: a repeat (``*``, ``+``, ``{n,}``,
``{n,m}`` with m > 1) that holds another repeat or an alternation (``(a+)+``, ``(\\w+\\s?)*``, ``(a|ab)*``).
Atomic groups ``(?>...)`` and possessive repeats (``*+``, ``++``) never backtrack into what they matched and
are accepted. A line longer than :data:`MAX_USER_LINE` characters is not matched by a user regex at all
(what is left, a polynomial pattern like ``a*a*a*b``, stays bounded on a line that short).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from trainprobe.errors import UsageError

try:  # the parser of re itself (Python >= 3.11 names it re._parser; 3.10 sre_parse)
    sre_parse: Any = importlib.import_module("re._parser")
    sre_constants: Any = importlib.import_module("re._constants")
except ImportError:  # pragma: no cover - Python 3.10
    sre_parse = importlib.import_module("sre_parse")
    sre_constants = importlib.import_module("sre_constants")

MAX_USER_LINE = 4096

_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}
_NESTING = {sre_constants.SUBPATTERN, sre_constants.ASSERT, sre_constants.ASSERT_NOT}


def _inner_ambiguity(items: Any) -> bool:
    """Whether a parsed (sub)pattern holds a backtracking repeat or an alternation."""
    for op, av in items:
        if op in _REPEATS and av[1] > 1:
            return True
        if op == sre_constants.BRANCH:
            return True
        if op in _NESTING and _inner_ambiguity(av[-1]):
            return True
    return False


def _catastrophic(items: Any) -> bool:
    """Whether a repeat in the pattern repeats something that can match one stretch of text in many ways."""
    for op, av in items:
        if op in _REPEATS:
            _lo, hi, sub = av
            if hi > 1 and _inner_ambiguity(sub):
                return True
            if _catastrophic(sub):
                return True
        elif op in _NESTING:
            if _catastrophic(av[-1]):
                return True
        elif op == sre_constants.BRANCH and any(_catastrophic(branch) for branch in av[1]):
            return True
    return False


def compile_user_regex(flag: str, pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or a UsageError (naming ``flag``) for one that is invalid or can backtrack
    without bound."""
    try:
        compiled = re.compile(pattern)
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UsageError(f"{flag}: not a valid regular expression ({exc})") from None
    if _catastrophic(parsed):
        raise UsageError(
            f"{flag}: {pattern!r} repeats a group that itself repeats or alternates (like (a+)+): on a line "
            "that almost matches it would run for minutes",
            hint="repeat something that matches one way (\\S+, [^,]*), or make the group atomic: (?>...) "
            "or a possessive repeat (++, *+)",
        )
    return compiled


__all__ = ["MAX_USER_LINE", "compile_user_regex"]
