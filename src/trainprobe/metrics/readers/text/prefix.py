"""What loggers and launchers put before a log message: a timestamp, a level, a logger name, a rank, a host.

``split_prefix`` strips any sequence of them, in any order, from the start of a line:

- timestamps (:mod:`.clock`), bare or bracketed: ``2026-11-29 22:36:21,226``, ``[22:36:21]``, glog's
  ``I1129 22:36:21.226 1234 train.py:10]``;
- levels: ``INFO``, ``[INFO]``, ``INFO:root:`` (``logging.basicConfig``), ``| INFO |`` (loguru, with its
  ``module:function:12 -``), ``root - INFO -``;
- brackets that hold a logger, a source location, a rank or a stamp: ``[__main__]``,
  ``[logging.py:96:log_dist]``, ``[Rank 0]``, ``[rank3]:``, ``[default0]:`` (torchrun), ``[1,0]<stdout>:``
  (mpirun), ``[NeMo I 2024-… f:381]``;
- a host before a colon, as pdsh and ``srun -l`` add it: ``gpu-node-07: ``, ``node3: ``, ``0: ``.

A bracket with a plain word (``[eval]``, ``[train]``) stays in the message: it may say which split the fields
are. Each element is one anchored, linear match; at most a dozen are taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainprobe.metrics.readers.text.clock import Stamp, match_stamp

_LEVEL_WORDS = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE|TRACE|SUCCESS|EXCEPTION)"
# ``INFO``, ``[INFO]``, ``INFO:``, ``INFO:root:`` (``logging.basicConfig``: level, one logger name, message)
_LEVEL = re.compile(r"\[?" + _LEVEL_WORDS + r"\]?(?:(?::[\w.<>\-]*)?:|(?=[\s|\-\[]|$))")
_LOCATION = re.compile(r"[\w.<>\-]+:[\w.<>\-]+:\d+\s+-(?=\s)")  # loguru's "module:function:12 -"
_NAME_BEFORE_LEVEL = re.compile(r"[\w.<>\-]+\s+-\s+(?=" + _LEVEL_WORDS + r"\b)")
_BRACKET = re.compile(r"\[([^\[\]\n]{1,120})\]:?")
_TAG = re.compile(r"(?:<std(?:out|err)>|\[?[Rr]ank\s?\d+\]?):")
_HOST = re.compile(r"([A-Za-z][\w\-.]{0,62}|\d{1,5}):\s+")
_SEP = re.compile(r"\s*(?:\||-(?=\s)|::?)\s*")
_SPACE = re.compile(r"\s+")
_GLOG_TAIL = re.compile(r"\s+\d+\s+[^\s\]]{1,200}:\d+\]")
_RANK_TEXT = re.compile(r"(?i)(?:rank|default|local_rank|global_rank|gpu|worker|node)\s?\d+|\d+(?:,\s?\d+)*")
_LOGGER_TEXT = re.compile(r"[\w<>\-]*[._:<][\w.:<>\-]*|" + _LEVEL_WORDS, re.I)
_LOGGER_AFTER_LEVEL = re.compile(r"[A-Za-z_<][\w.<>\-]{0,80}(?=\s*\||\s+-\s|:\s)")
_SYSLOG_SOURCE = re.compile(r"[\w.\-]{1,64}\s+[\w./\-]{1,64}(?:\[\d+\])?:\s")
_SPLIT_NAMES = frozenset({"train", "training", "valid", "val", "validation", "eval", "evaluation", "test"})
_STEPLIKE_HOST = re.compile(r"(?i)(?:step|epoch|iter|it|batch|s)\d*$")


@dataclass(frozen=True)
class Prefix:
    body_start: int
    stamp: Stamp | None


def _bracket_is_prefix(inner: str) -> bool:
    inner = inner.strip()
    if "=" in inner:
        return False
    if _RANK_TEXT.fullmatch(inner) or _LOGGER_TEXT.fullmatch(inner):
        return True
    # ``[11/29 22:36:21 d2.engine.train_loop]``: a stamp, then a logger
    stamp = match_stamp(inner) if inner[:1].isdigit() else None
    if stamp is not None and _LOGGER_TEXT.fullmatch(inner[stamp.end :].strip()):
        return True
    # ``[NeMo I 2024-01-01 10:00:00 nemo_logging:381]``: a stamp and a source location
    return bool(re.search(r"\s[\w.]+:\d+$", inner))


def _host_is_prefix(line: str, m: re.Match[str]) -> bool:
    name = m.group(1)
    if name.isdigit():
        return True
    if _STEPLIKE_HOST.match(name):
        return False
    if not (any(c.isdigit() for c in name) or "-" in name or "." in name):
        return False
    # ``val-loss: 2.3`` is a field: a host is followed by words, never by a number
    rest = line[m.end() : m.end() + 1]
    return bool(rest) and not (rest.isdigit() or rest in "-+.")


def split_prefix(line: str) -> Prefix:
    """Where the message starts, and the line's timestamp (the first one in the prefix)."""
    pos = 0
    stamp: Stamp | None = None
    took = 0
    saw_level = False
    n = len(line)
    while took < 12 and pos < n:
        m = _SPACE.match(line, pos)
        if m:
            pos = m.end()
        if pos >= n:
            break
        c = line[pos]
        got_end = -1
        if stamp is None:
            s = match_stamp(line, pos + 1 if c == "[" else pos)
            if s is not None:
                end = s.end
                if c == "[":
                    if line[end : end + 1] != "]":
                        s = None
                    else:
                        end += 1
                if s is not None:
                    end = _after_stamp(line, s.kind, end)
                    stamp, got_end = s, end
        if got_end < 0:
            m = _LEVEL.match(line, pos)
            if m:
                got_end, saw_level = m.end(), True
        if got_end < 0:
            for pattern in (_LOCATION, _NAME_BEFORE_LEVEL, _TAG):
                m = pattern.match(line, pos)
                if m:
                    got_end = m.end()
                    break
        if got_end < 0 and saw_level:
            m = _LOGGER_AFTER_LEVEL.match(line, pos)
            # a logger named for a split (fairseq's ``| valid |``, ``| train |``) says what the fields are
            if (
                m
                and m.group(0).lower() not in _SPLIT_NAMES
                and not _starts_field(line, _skip_sep(line, m.end()))
            ):
                got_end = m.end()
        if got_end < 0 and c == "[":
            m = _BRACKET.match(line, pos)
            # ``[3]`` first on the line, alone before the fields, is a round (XGBoost's ``[3] train-rmse``);
            # a rank is followed by more prefix (``[3] [INFO]``, ``[3]:``), a pid follows a stamp (``[…][9]``)
            if m is not None and took == 0 and _is_round(line, m):
                m = None
            if m and _bracket_is_prefix(m.group(1)):
                got_end = m.end()
                if stamp is None:
                    inner = m.group(1)
                    for k in range(len(inner)):
                        if inner[k].isdigit() and (k == 0 or not inner[k - 1].isalnum()):
                            s = match_stamp(inner, k)
                            if s is not None and s.kind in ("iso", "md", "hms"):
                                stamp = Stamp(s.kind, pos + 1 + s.start, pos + 1 + s.end, s.seconds)
                                break
        if got_end < 0:
            m = _HOST.match(line, pos)
            if (
                m
                and _host_is_prefix(line, m)
                and (took or not m.group(1).isdigit() or _more_prefix(line, m.end()))
            ):
                got_end = m.end()
        if got_end < 0:
            break
        pos = got_end
        took += 1
        after = _skip_sep(line, pos)
        if not _starts_field(line, after):
            pos = after
    return Prefix(pos, stamp)


def _after_stamp(line: str, kind: str, end: int) -> int:
    """glog's thread id and source location up to its ``]``; syslog's ``host program[pid]:``."""
    if kind == "glog":
        m = _GLOG_TAIL.match(line, end)
        return m.end() if m else end
    if kind == "syslog":
        m = _SYSLOG_SOURCE.match(line, end + 1 if line[end : end + 1] == " " else end)
        return m.end() if m else end
    return end


def _skip_sep(line: str, pos: int) -> int:
    m = _SEP.match(line, pos)
    return m.end() if m else pos


def _is_round(line: str, m: re.Match[str]) -> bool:
    """A bracketed whole number with nothing of a prefix after it: a round or step, not a rank."""
    if not m.group(1).strip().isdigit() or m.group(0).endswith(":"):
        return False
    rest = line[m.end() : m.end() + 200].lstrip()
    return bool(rest) and not _more_prefix(rest, 0)


def _more_prefix(line: str, pos: int) -> bool:
    """Whether another prefix element follows (``0: [2024-…] INFO …`` from ``srun -l``)."""
    rest = line[pos : pos + 1]
    return rest == "[" or match_stamp(line, pos) is not None or bool(_LEVEL.match(line, pos))


def _starts_field(line: str, pos: int) -> bool:
    return pos < len(line) and (line[pos].isdigit() or line[pos] in "+.")


__all__ = ["Prefix", "split_prefix"]
