"""What the tokens of one log message say: ``(key, value)`` fields, counters, units, labels, and how much of
the message is prose.

The rules, each a general mechanism rather than one project's line shape:

- a **value** is a number, ``nan``/``inf``, or a quoted number (``'loss': '2.31'``); a list after a key
  (``lr=[9.6e-06, 9.6e-06]``, ``Epoch: [0]``) gives its first element, a list of (index, value) pairs
  (``reward: [(0, '-92.8')]``) its first pair's value;
- its **key** is the name before it: a quoted name, or words before ``:``/``=`` (``train loss:``,
  ``lm loss:``, ``elapsed time per iteration (ms):``, ``Epoch(train)``), or, with only a space between, the
  last word (``loss 2.5``), or every word of a ``|``-separated segment (``| valid loss 5.50 |``); a key
  inside a group in parentheses after a name's ``:`` is qualified by it (``lag: (min: -1.0)`` → ``lag/min``);
- ``N/M`` is a counter: ``iteration 10/ 1000`` gives the iteration and its total, an unnamed
  ``[640/60000]`` or ``100/1000`` (a progress bar) is the run's counter, named by a word after it
  (``200/ 2983 batches``); a compound key ``"global_step/max_steps": "1/2353"`` splits in two;
- a number glued to a unit (``267.36ms``, ``10.0it/s``, ``99%``) keeps the unit; ``3 (3.44)`` is a value and
  its running average; ``1:02:03`` is a duration in seconds;
- words before a ``:`` or ``|`` that name no value (``Test set:``, ``[eval]``, ``Epoch(val)``) are **labels**:
  they say which split the fields belong to. Every other word is prose, and a message that is mostly prose
  (echoed source, tracebacks, sentences that mention a number) is not a metric row.

Every number of the message is a **slot** (key or ``None``) in order, so a template can read lines of the same
shape without tokenizing them again (:mod:`trainprobe.metrics.readers.text.template`). Values and their keys
are found by :class:`~.cursor.TokenCursor`; this module walks the message and decides what each one is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trainprobe.metrics.readers.text.cursor import KEY_PUNCT_SEPS, SPLIT_LABELS, TokenCursor, clean_key
from trainprobe.metrics.readers.text.tokens import (
    NON_FINITE_WORDS,
    NUMBER,
    PUNCT,
    QUOTED,
    SPACE,
    UNITS,
    WORD,
    Token,
    is_unit,
    to_float,
    tokenize,
)
from trainprobe.metrics.splits import is_epoch_key, is_step_key
from trainprobe.metrics.table import TOTAL_PREFIX

# Keys that are never metrics although a number follows them: launcher and progress-bar furniture.
NOT_METRIC_KEYS = frozenset(
    {"eta", "v_num", "pid", "tid", "rank", "local_rank", "global_rank", "world_size", "port", "seed", "node"}
)
COUNTER_KEY = "#counter"
# A source file's name before a number is where the line was logged from (``(main.py 222)``,
# ``(NeuralCFexample.scala:70)``): the number is a line of code, not a value, whatever the project.
_SOURCE_FILE = re.compile(
    r"(?i)[\w.\-/\\]*\w\.(?:py|pyx|ipynb|scala|java|kt|c|cc|cpp|cxx|cu|h|hpp|go|rs|js|ts|jl|lua|rb|r|sh|m)"
)


def not_a_field(key: str) -> bool:
    """A key whose number is never a metric: launcher furniture (``rank``, ``eta``) or a source location."""
    return key.lower() in NOT_METRIC_KEYS or _SOURCE_FILE.fullmatch(key) is not None


@dataclass
class Slot:
    """One number of the message: where it is, and the field it fills (None: a number that is no field)."""

    start: int
    end: int
    key: str | None


@dataclass
class Fields:
    """``values`` holds the fields, the run's counter under ``COUNTER_KEY`` and each counter's total under
    ``TOTAL_PREFIX + key``."""

    values: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    field_chars: int = 0
    prose_chars: int = 0
    prose_words: list[str] = field(default_factory=list)
    exact: bool = True  # every number is a plain slot: the message can become a template

    def unnamed(self, message: str) -> list[str]:
        """The numbers of ``message`` that fill no field."""
        return [message[s.start : s.end] for s in self.slots if s.key is None]


class _Scan(TokenCursor):
    def __init__(self, toks: list[Token]) -> None:
        self.out = Fields()
        super().__init__(toks, self.out.labels)

    # -- the walk --------------------------------------------------------------------------------------------
    def run(self) -> Fields:
        i = 0
        while i < self.n:
            if self.used[i]:
                i += 1
                continue
            if self.toks[i] == (PUNCT, "["):
                done = self.take_list(i)
                if done is not None:
                    i = done
                    continue
            got = self.value_at(i)
            i = i + 1 if got is None else self.take_value(got)
        self.finish_words()
        return self.out

    def take_list(self, i: int) -> int | None:
        """``key=[v1, v2, ...]`` and ``Epoch [1]``: the key gets the first element; every number is a slot."""
        key, key_idx = self.key_before(i)
        if key is None:
            return None
        j = self.skip_space(i + 1, 1)
        if self.text(j) == "(":
            return self.take_pairs(i, j, key, key_idx)
        values: list[tuple[float, int, int, float | None]] = []
        while j < self.n:
            v = self.value_at(j)
            if v is None or v[3] is not None:
                break
            values.append(v)
            j = self.skip_space(v[2] + 1, 1)
            if self.text(j) != ",":
                break
            j = self.skip_space(j + 1, 1)
        if not values or self.text(j) != "]":
            return None
        explicit = self.text(self.skip_space(i - 1, -1)) in KEY_PUNCT_SEPS
        if not explicit and len(values) > 1:
            return None  # ``Conv [3, 16, 3, 2]``: arguments after a name, not the name's value
        for v in values:
            self.slot(v[1], v[2], None)
        if not not_a_field(key) and self.store(key, values[0][0], key_idx):
            self.out.slots[-len(values)].key = key
        for t in range(i, j + 1):
            self.used[t] = True
        return j + 1

    def take_pairs(self, i: int, j: int, key: str, key_idx: list[int]) -> int | None:
        """``Avg episode reward: [(0, '-92.843')]``: a list of (index, value) pairs, one per policy or agent,
        gives the key its first pair's value; every number is a slot."""
        pairs: list[tuple[int, int]] = []  # the token of each pair's index and of its value
        while self.text(j) == "(":
            index = self.value_at(self.skip_space(j + 1, 1))
            comma = -1 if index is None else self.skip_space(index[2] + 1, 1)
            value = self.value_at(self.skip_space(comma + 1, 1)) if self.text(comma) == "," else None
            close = -1 if value is None else self.skip_space(value[2] + 1, 1)
            if index is None or value is None or self.text(close) != ")" or index[3] is not None:
                return None
            pairs.append((index[1], value[1]))
            j = self.skip_space(close + 1, 1)
            if self.text(j) == ",":
                j = self.skip_space(j + 1, 1)
        if not pairs or self.text(j) != "]" or self.text(self.skip_space(i - 1, -1)) not in KEY_PUNCT_SEPS:
            return None
        for at, value_at in pairs:
            self.slot(at, at, None)
            self.slot(value_at, value_at, None)
        first = self.value_at(pairs[0][1])
        if first is not None and not not_a_field(key) and self.store(key, first[0], key_idx):
            self.out.slots[-2 * len(pairs) + 1].key = key
        for t in range(i, j + 1):
            self.used[t] = True
        return j + 1

    def slot(self, first: int, last: int, key: str | None) -> Slot:
        start = self.starts[first]
        end = self.starts[last] + len(self.text(last))
        made = Slot(start, end, key)
        self.out.slots.append(made)
        return made

    def store(self, key: str, value: float, key_idx: list[int]) -> bool:
        if key in self.out.values:
            return False
        self.out.values[key] = value
        if not key.startswith(TOTAL_PREFIX):
            self.out.field_chars += len(key) + 1
        for t in key_idx:
            self.used[t] = True
        return True

    def take_value(self, got: tuple[float, int, int, float | None]) -> int:
        value, first, last, total = got
        out = self.out
        key, key_idx = self.key_before(first)
        j = last + 1
        unit = ""
        if self.kind(j) == WORD and self.text(j) in UNITS:
            unit = self.text(j)  # a glued unit (``267.36ms``, ``10.0it/s``)
        elif self.text(j) == "%":
            unit = "%"
        elif self.text(j) == ":" and self.kind(j + 1) == NUMBER and self.kind(first) == NUMBER:
            return self.take_clock(first, key, key_idx)
        if unit:
            self.used[j] = True
            j += 1
        elif not self.boundary_after(last):
            # ``5abc``, ``2.1.0``: a number inside something else
            self.slot(first, last, None)
            for t in range(first, last + 1):
                self.used[t] = True
            return last + 1
        for t in range(first, last + 1):
            self.used[t] = True
        if self.kind(first) == QUOTED and total is not None:
            out.exact = False  # two numbers in one token: no template slot for each
        my_slot = self.slot(first, last, None)
        total_slot: Slot | None = None
        end = j
        if total is None and not unit:
            k = self.skip_space(j, 1)
            m = self.skip_space(k + 1, 1)
            if self.text(k) == "/" and self.kind(m) == NUMBER:
                total = to_float(self.text(m))
                total_slot = self.slot(m, m, None)
                for t in range(j, m + 1):
                    self.used[t] = True
                end = m + 1
        if total is not None and key is None:
            key, key_idx, end = self.bracket_counter_name(first, end)
        if total is not None and key is None:
            key, key_idx = self.counter_name(end), []
        if key is None and total is None and self.leading_bracket(first, last):
            key = COUNTER_KEY  # ``[3]  train-merror:0.03``: the round the line is of
        end = self.take_average(end)
        if key is None or not_a_field(key):
            for t in key_idx:
                self.used[t] = True
            return end
        if total is not None and "/" in key and key_idx and self.kind(key_idx[-1]) == QUOTED:
            key = key.partition("/")[0]  # ``"global_step/max_steps": "1/2353"``
        if self.store(key, value, key_idx):
            my_slot.key = key
            out.field_chars += last + 1 - first
            if unit:
                out.units[key] = unit
            if total is not None and self.store(TOTAL_PREFIX + key, total, []) and total_slot is not None:
                total_slot.key = TOTAL_PREFIX + key
        return end

    def leading_bracket(self, first: int, last: int) -> bool:
        """A whole number alone in brackets before anything but punctuation (``[3]``, ``#> [3]``)."""
        if self.text(first - 1) != "[" or self.text(last + 1) != "]" or not self.text(first).isdigit():
            return False
        return all(self.kind(t) in (PUNCT, SPACE) for t in range(first - 1))

    def bracket_counter_name(self, first: int, end: int) -> tuple[str | None, list[int], int]:
        """A ``[N/M]`` named by the step or epoch word before it (``Epoch [1/5], Step [10/62]``), or the
        outer of two nested ones (``Train: [0/300][0/195]``: epochs, then iterations within one)."""
        open_at = self.skip_space(first - 1, -1)
        if self.text(open_at) != "[" or self.used[open_at] or self.text(end) != "]":
            return None, [], end
        w = self.skip_space(open_at - 1, -1)
        if w >= 0 and self.kind(w) == WORD and not self.used[w]:
            word = self.text(w)
            if is_step_key(word) or is_epoch_key(word):
                self.used[w] = self.used[open_at] = self.used[end] = True
                return clean_key(word), [w], end + 1
        if self.text(end + 1) == "[" and self.kind(end + 2) == NUMBER and self.text(end + 3) == "/":
            return "epoch", [], end
        return None, [], end

    def counter_name(self, end: int) -> str:
        """An unnamed ``N/M``: the run's counter, or named by a word right after it
        (``200/ 2983 batches``)."""
        w = self.skip_space(end, 1)
        if (
            w != end
            and self.kind(w) == WORD
            and self.boundary_after(w)
            and self.text(w).lower() not in NON_FINITE_WORDS
            and self.text(self.skip_space(w + 1, 1)) not in KEY_PUNCT_SEPS
        ):
            self.used[w] = True
            return clean_key(self.text(w))
        return COUNTER_KEY

    def take_average(self, end: int) -> int:
        """A running average, a percentage or a count in parentheses right after a value: ``3.43 (3.44)``,
        ``(1%)``, ``(9510/10000)``."""
        p = self.skip_space(end, 1)
        if self.text(p) != "(":
            return end
        q = self.skip_space(p + 1, 1)
        inner = self.value_at(q) if q < self.n else None
        if inner is None or inner[3] is not None:
            return end
        r = inner[2] + 1
        if self.text(r) == "%":
            r += 1
        r = self.skip_space(r, 1)
        count = self.skip_space(r + 1, 1)
        has_count = self.text(r) == "/" and self.kind(count) == NUMBER
        if has_count:  # ``Acc: 95.1% (9510/10000)``: the count behind the value, not a progress counter
            r = self.skip_space(count + 1, 1)
        if self.text(r) != ")":
            return end
        self.slot(inner[1], inner[2], None)
        if has_count:
            self.slot(count, count, None)
        for t in range(p, r + 1):
            self.used[t] = True
        return r + 1

    def take_clock(self, first: int, key: str | None, key_idx: list[int]) -> int:
        """``1:02:03`` / ``02:03``: a duration or a time of day, in seconds; every part is a slot."""
        parts: list[int] = [first]
        j = first + 1
        while len(parts) < 3 and self.text(j) == ":" and self.kind(j + 1) == NUMBER:
            parts.append(j + 1)
            j += 2
        seconds = 0.0
        for p in parts:
            seconds = seconds * 60 + to_float(self.text(p))
            self.slot(p, p, None)
        for t in range(first, j):
            self.used[t] = True
        if key is not None and not not_a_field(key):
            self.out.exact = False  # a field made of several numbers
            if self.store(key, seconds, key_idx):
                self.out.units[key] = "s"
        for t in key_idx:
            self.used[t] = True
        return j

    def finish_words(self) -> None:
        """Unused words: labels (before ``:``/``|``/``]``/``-`` or in brackets) or prose."""
        out = self.out
        i = 0
        while i < self.n:
            if self.used[i] or self.toks[i][0] not in (WORD, QUOTED):
                i += 1
                continue
            run = [i]
            k = i + 1
            while (
                k + 1 < self.n and self.kind(k) == SPACE and self.kind(k + 1) == WORD and not self.used[k + 1]
            ):
                run.append(k + 1)
                k += 2
            after = self.skip_space(k, 1)
            before = self.skip_space(i - 1, -1)
            group = ""
            if self.text(after) == "(":  # ``time (ms) |``: a label with its unit
                close = self.skip_space(after + 1, 1)
                close = self.skip_space(close + 1, 1) if self.kind(close) == WORD else close
                if self.text(close) == ")":
                    group = "".join(self.text(t) for t in range(after, close + 1))
                    for t in range(after, close + 1):
                        self.used[t] = True
                    after = self.skip_space(close + 1, 1)
            closing = self.text(after)
            # a split word that leads the message names its split (``Validation Step 1000, Total Loss: …``)
            leads = len(run) == 1 and before < 0 and self.text(i).lower() in SPLIT_LABELS
            is_label = leads or (
                len(run) <= 3
                and (
                    closing in (":", "|", "]", ")", "-", ">")
                    or (after >= self.n and before < 0)
                    or (self.text(before) in ("[", "(", "|") and closing in ("]", ")", "|", ""))
                )
            )
            words = [self.text(t) for t in run]
            if len(run) == 1 and self.kind(before) == NUMBER and is_unit(words[0]):
                i = k  # ``4.71 iter/s``: the number's unit, with a space between; no prose
                continue
            if after >= self.n and len(run) <= 3 and self.text(before) in (":", "|", ";") and out.slots:
                i = k  # ``… : 2.18815 : new best``: a remark on the record after its last field; no prose
                continue
            if is_label:
                out.labels.append(" ".join(w.strip("'\"") for w in words) + (" " + group if group else ""))
            else:
                out.prose_chars += sum(len(w) for w in words)
                out.prose_words.extend(words)
            i = k


def read_fields(message: str) -> Fields:
    """The fields of one message (a log line after its timestamp/logger prefix)."""
    return _Scan(tokenize(message)).run()


def read_tokens(toks: list[Token]) -> Fields:
    return _Scan(toks).run()


__all__ = ["COUNTER_KEY", "NOT_METRIC_KEYS", "Fields", "Slot", "not_a_field", "read_fields", "read_tokens"]
