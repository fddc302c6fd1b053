"""A cursor over the tokens of one log message (:mod:`.tokens`): where a value starts and ends (a number,
``nan``, a quoted number, ``N/M`` in quotes), and the key before it that names it — a quoted name, words
before ``:``/``=``, a group in parentheses (``elapsed time per iteration (ms):``), the last word, or the
words of a ``|``-separated segment. :mod:`.fields` walks the message with it.
"""

from __future__ import annotations

from trainprobe.metrics.readers.text.tokens import (
    NON_FINITE_WORDS,
    NUMBER,
    PUNCT,
    QUOTED,
    SPACE,
    UNITS,
    WORD,
    Token,
    is_number_text,
    to_float,
)

# what may follow a number that stands by itself; an opening bracket starts a group of its own glued to it
# (``Epoch 1[16/5011]``: the epoch, then its counter; ``loss 3.43(3.44)``: a value and its running average)
BOUNDARY_PUNCT = frozenset(",;|)]}>/'\"[(")
KEY_PUNCT_SEPS = frozenset(":=")
_MAX_KEY_WORDS = 8
_GROUP_REACH = 48  # tokens back from a key to the ``(`` of the group it is in: a line costs no more than that
# verbs between a name and its value, read as a ``:`` (``loss is 0.1287``, ``accuracy was 0.93``)
_COPULAS = frozenset({"is", "was", "are", "were", "equals"})
_NOT_NAMES = frozenset({"the", "a", "an", "our", "its", "and", "or", "then", "while", "but", "with", "so"})
SPLIT_LABELS = frozenset(
    {"train", "training", "val", "valid", "validation", "eval", "evaluation", "test", "testing"}
)


def clean_key(text: str) -> str:
    text = text.strip().strip("'\"").strip()
    return " ".join(text.split()).rstrip(".-")


class TokenCursor:
    """The tokens of one message, which of them are used, and where each starts; finds values and the keys
    that name them. A key's parenthesised split name (``Epoch(train)``) goes to ``labels``."""

    def __init__(self, toks: list[Token], labels: list[str]) -> None:
        self.toks = toks
        self.n = len(toks)
        self.used = [False] * self.n
        self.has_pipes = any(t == (PUNCT, "|") for t in toks)
        self.starts: list[int] = []
        pos = 0
        for _kind, text in toks:
            self.starts.append(pos)
            pos += len(text)
        self.labels = labels

    def kind(self, i: int) -> str:
        return self.toks[i][0] if 0 <= i < self.n else ""

    def text(self, i: int) -> str:
        return self.toks[i][1] if 0 <= i < self.n else ""

    def skip_space(self, i: int, step: int) -> int:
        while 0 <= i < self.n and self.toks[i][0] == SPACE:
            i += step
        return i

    # -- values --------------------------------------------------------------------------------------------
    def value_at(self, i: int) -> tuple[float, int, int, float | None] | None:
        """(value, first token, last token, total of a quoted ``N/M``) of a value starting at token ``i``."""
        kind, text = self.toks[i]
        if kind == NUMBER:
            return to_float(text), i, i, None
        if kind == WORD and text.lower() in NON_FINITE_WORDS and self.non_finite_is_value(i, i):
            return to_float(text), i, i, None
        if kind == PUNCT and text in "+-" and self.kind(i + 1) == WORD:
            word = self.text(i + 1)
            if word.lower() in NON_FINITE_WORDS and self.non_finite_is_value(i, i + 1):
                return to_float(text + word), i, i + 1, None
        if kind == QUOTED:
            inner = text[1:-1].strip()
            if is_number_text(inner):
                return to_float(inner), i, i, None
            head, slash, tail = inner.partition("/")
            if slash and is_number_text(head) and is_number_text(tail):
                return to_float(head), i, i, to_float(tail)
        return None

    def non_finite_is_value(self, first: int, last: int) -> bool:
        """``loss: nan``, ``loss nan``, ``step_avg:nanms``, but not ``number of nan iterations: 0``."""
        glued_unit = self.kind(last + 1) == WORD and self.text(last + 1) in UNITS
        if not (glued_unit or self.boundary_after(last)):
            return False
        prev = self.skip_space(first - 1, -1)
        if self.text(prev) in KEY_PUNCT_SEPS:
            return True
        nxt = self.skip_space(last + 1, 1)
        if self.kind(nxt) == WORD and self.text(self.skip_space(nxt + 1, 1)) in KEY_PUNCT_SEPS:
            return False
        return self.kind(prev) == WORD

    def boundary_after(self, j: int) -> bool:
        nxt = j + 1
        if nxt >= self.n:
            return True
        kind, text = self.toks[nxt]
        if kind == SPACE:
            return True
        if kind == PUNCT:
            if text == ".":
                return nxt + 1 >= self.n or self.kind(nxt + 1) == SPACE
            return text in BOUNDARY_PUNCT or text in KEY_PUNCT_SEPS
        return False

    # -- keys ------------------------------------------------------------------------------------------------
    def key_before(self, i: int) -> tuple[str | None, list[int]]:
        """The key naming a value that starts at token ``i``, and the tokens it spans."""
        j = self.skip_space(i - 1, -1)
        sep = " "
        if self.kind(j) == PUNCT and self.text(j) in KEY_PUNCT_SEPS and not self.used[j]:
            sep = self.text(j)
            j = self.skip_space(j - 1, -1)
        elif j == i - 1 and self.kind(j) == WORD:
            return None, []  # glued to a word: part of a name
        copula: list[int] = []
        if sep == " " and self.kind(j) == WORD and self.text(j).lower() in _COPULAS and not self.used[j]:
            # ``loss is 0.1287``: the verb says what ``:`` says
            copula, sep = [j], ":"
            j = self.skip_space(j - 1, -1)
        if j < 0 or self.used[j]:
            return None, []
        kind, text = self.toks[j]
        if kind == QUOTED and not is_number_text(text[1:-1]):
            return clean_key(text), [j]
        if kind == PUNCT and text == ")":
            return self.grouped_key(j, sep)
        if kind != WORD:
            return None, []
        idx = self.words_before(j, sep)
        if not idx:
            return None, []
        if copula:  # ``… and the accuracy is 0.93``: the name begins after the last word that is none; the
            # words before it stay prose (``Training is done and the best AP is 0.00`` is a sentence)
            cut = max(
                (n + 1 for n, t in enumerate(idx[:-1]) if self.text(t).lower() in _NOT_NAMES), default=0
            )
            idx = idx[cut:]
        key = clean_key(" ".join(self.text(t) for t in idx))
        if sep in KEY_PUNCT_SEPS and (group := self.group_name(idx[0])) is not None:
            key = f"{group}/{key}"
        return key, [*idx, *copula]

    def group_name(self, first: int) -> str | None:
        """``Policy #0 lag: (min: -1.0, avg: -1.0, max: -1.0)``: the name before the ``:`` (or ``is``) of a
        group in parentheses that a key at token ``first`` is inside of. Alone, ``min`` or ``avg`` names no
        series; several groups of one line (a lag's, a reward's) would each give one, and all but one would
        be lost. The name's words stay unused (each key of the group takes them)."""
        k = first - 1
        for _ in range(_GROUP_REACH):
            k = self.skip_space(k, -1)
            if k < 0 or self.text(k) in ")[]{}":
                return None
            if self.text(k) == "(":
                break
            k -= 1
        else:
            return None
        colon = self.skip_space(k - 1, -1)  # ``lag: (``, or a verb that says what ``:`` says (``Fps is (``)
        if colon < 0 or not (self.text(colon) in KEY_PUNCT_SEPS or self.text(colon).lower() in _COPULAS):
            return None
        words = self.words_before(self.skip_space(colon - 1, -1), ":")
        return clean_key(" ".join(self.text(t) for t in words)) if words else None

    def grouped_key(self, close: int, sep: str) -> tuple[str | None, list[int]]:
        """``elapsed time per iteration (ms):`` and ``Epoch(train)``: a group in parentheses ends the key; a
        split name in it (``train``, ``val``) is also a label."""
        k = close - 1
        while k >= 0 and self.kind(k) in (WORD, SPACE) and not self.used[k]:
            k -= 1
        if k < 0 or self.text(k) != "(" or k == close - 1:
            return None, []
        glued = self.kind(k - 1) == WORD
        if sep == " " and not glued:
            return None, []
        idx = self.words_before(self.skip_space(k - 1, -1), sep)
        if not idx:
            return None, []
        group = "".join(self.text(t) for t in range(k, close + 1))
        inner = group[1:-1].strip()
        if inner.lower() in SPLIT_LABELS:
            self.labels.append(inner)
        words = " ".join(self.text(t) for t in idx)
        if len(inner.split()) > 1:
            # ``acc (higher is better) :``: a remark, not part of the name
            return clean_key(words), [*idx, *range(k, close + 1)]
        return clean_key(words + ("" if glued else " ") + group), [*idx, *range(k, close + 1)]

    def words_before(self, j: int, sep: str) -> list[int]:
        """Indices of the words ending at token ``j`` that form one key (how many: see the module
        docstring)."""
        if j < 0 or self.kind(j) != WORD or self.used[j]:
            return []
        idx = [j]
        k = j - 1
        while k >= 1 and len(idx) < _MAX_KEY_WORDS:
            if (
                self.kind(k) == SPACE
                and len(self.text(k)) <= 2
                and self.kind(k - 1) == WORD
                and not self.used[k - 1]
                and not self.text(k - 1).endswith((".", "!", "?"))  # a sentence ends before the key
            ):
                idx.append(k - 1)
                k -= 2
                continue
            break
        start = self.skip_space(k, -1)
        # a ``|``-separated segment, the first one of a ``|``-separated line included, or the words after a
        # field and its ``:``/``;`` (``iter 10: train loss 2.11``)
        in_segment = (start >= 0 and self.text(start) == "|") or (start < 0 and self.has_pipes)
        after_field = start > 0 and self.text(start) in ":;" and self.used[self.skip_space(start - 1, -1)]
        if sep == " " and after_field and len(idx) <= 3:
            in_segment = True
        if sep == " " and not in_segment:
            idx = idx[:1]  # ``the loss went from 6.4``: only "from" could name 6.4, and it is prose
        idx.reverse()
        return idx


__all__ = ["KEY_PUNCT_SEPS", "SPLIT_LABELS", "TokenCursor", "clean_key"]
