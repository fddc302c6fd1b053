"""A log message as tokens: numbers, words, quoted strings, spaces and single punctuation characters.

One compiled alternation, each branch a single character class loop or a bounded literal, so a line of any
length lexes in time linear in its length (the shape regexes this replaces backtracked for seconds on
``| a       …       b |`` and ``a-a-a-…``). Everything that gives tokens a meaning (keys, values, counters,
units) is in :mod:`trainprobe.metrics.readers.text.fields`.
"""

from __future__ import annotations

import re

NUMBER = "n"
WORD = "w"
QUOTED = "q"
SPACE = "s"
PUNCT = "p"

# A number may group its digits by thousands (``2,097,152``). A word may hold digits, dots, dashes and ``@``
# after its first letter (``grad-norm``, ``Acc@1``, ``top1``, ``iter_0001000``) and slashes between names
# (``train/loss``, ``it/s``), never a slash before a number, so ``epoch=0/micro_step=10`` splits at them.
_LEX = re.compile(
    r"([-+]?(?:[1-9]\d{0,2}(?:,\d{3})+(?![\d.])|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|([A-Za-z_](?:[\w.@\-]|/(?=[A-Za-z_]))*)"
    r"|('[^'\n]{0,256}'|\"[^\"\n]{0,256}\")"
    r"|(\s+)"
    r"|(.)",
    re.S,
)
_KINDS = (NUMBER, WORD, QUOTED, SPACE, PUNCT)

Token = tuple[str, str]

# A unit glued to a number: kept for time fields (``train_time:196649ms``), ignored otherwise; split off a
# glued ``nan`` (``step_avg:nanms``).
UNITS = frozenset(
    {
        "ms",
        "s",
        "sec",
        "secs",
        "us",
        "µs",
        "ns",
        "min",
        "m",
        "h",
        "hr",
        "x",
        "it",
        "it/s",
        "s/it",
        "k",
        "K",
        "M",
        "G",
        "B",
        "T",
        "GB",
        "MB",
        "KB",
        "GiB",
        "MiB",
        "KiB",
        "TB",
        "G/s",
        "ex/s",
        "tok/s",
        "samples/s",
        "tokens/s",
        "img/s",
        "ms/step",
        "s/step",
        "ms/it",
        "ms/batch",
        "s/batch",
        "us/step",
        "%",
    }
)

NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity"})
# a rate or a time per thing, whatever it counts (``iter/s``, ``images/sec``, ``s/batch``)
_RATE = re.compile(r"[A-Za-z]{1,16}/(?:s|sec|step|it|iter|batch)|(?:s|ms|us|sec)/[A-Za-z]{1,16}")


def is_unit(word: str) -> bool:
    """Whether ``word`` is a unit: one of :data:`UNITS`, or a rate (``iter/s``, ``s/100`` is none)."""
    return word in UNITS or _RATE.fullmatch(word) is not None


def tokenize(message: str) -> list[Token]:
    """``(kind, text)`` for every token of ``message``, in order; their texts join back to ``message``."""
    out: list[Token] = []
    append = out.append
    for num, word, quoted, space, punct in _LEX.findall(message):
        if num:
            append((NUMBER, num))
        elif word:
            low = word[:3].lower()
            if (low == "nan" or low == "inf") and len(word) > 3 and word[3:] in UNITS:
                append((WORD, word[:3]))  # ``nanms``: a NaN with its unit
                append((WORD, word[3:]))
            else:
                append((WORD, word))
        elif space:
            append((SPACE, space))
        elif quoted:
            append((QUOTED, quoted))
        else:
            append((PUNCT, punct))
    return out


def is_number_text(text: str) -> bool:
    """Whether ``text`` is one number as a logger writes it (``nan``/``inf`` included)."""
    low = text.strip().lower().lstrip("+-")
    if low in NON_FINITE_WORDS:
        return True
    toks = tokenize(text.strip())
    return len(toks) == 1 and toks[0][0] == NUMBER


def to_float(text: str) -> float:
    """The value of a number token (``NaN``, ``-inf``, ``Infinity`` included)."""
    try:
        return float(text.replace(",", "") if "," in text else text)
    except ValueError:
        low = text.lower()
        sign = -1.0 if low.startswith("-") else 1.0
        return float("nan") if "nan" in low else sign * float("inf")


__all__ = [
    "NON_FINITE_WORDS",
    "NUMBER",
    "PUNCT",
    "QUOTED",
    "SPACE",
    "UNITS",
    "WORD",
    "Token",
    "is_number_text",
    "is_unit",
    "to_float",
    "tokenize",
]
