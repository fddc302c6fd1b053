"""Timestamps at the start of log lines: recognising them, their seconds, and decoding a column of
fixed-width stamps at once.

Kinds: ``iso`` (``2026-11-29 22:36:21,226``, ``2026-11-29T22:36:21.226+01:00``, ``2024/01/01 10:00:00``; UTC
unless a zone is given), ``hms`` (``[22:36:21]``: seconds of the day, wrapping at midnight), ``glog``
(``I1129 22:36:21.226123``: no year, taken as 2000 so only gaps count), ``md`` (``11/29 22:36:21``,
``11-29 22:36:21``: no year either), ``syslog`` (``Nov 29 22:36:21``,
``Sun Nov 29 22:36:21 UTC 2026``), ``epoch`` (``1700000058.25``). A stamp that looks right but is no date
(month 13, hour 25) is still a stamp, with no seconds: the line keeps its fields, the row has no wall clock.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import numpy as np

_ISO = re.compile(
    r"(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"(Z|[+-]\d{2}:?\d{2})?(?![\d:])"
)
# month and day with no year (detectron2's ``[11/29 22:36:21 d2.engine…]``, ``11-29 22:36:21``): taken as in
# 2000, as glog's, so only gaps count
_MONTH_DAY = re.compile(r"(\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?![\d:])")
_HMS = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?![\d:])")
_GLOG = re.compile(r"[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?![\d:])")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_SYSLOG = re.compile(
    r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\w* )?"
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\w* {1,2}(\d{1,2}),? "
    r"(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?: [A-Z]{2,5})?(?: (\d{4}))?(?![\d:])"
)
_EPOCH = re.compile(r"(1\d{9})(?:\.(\d{1,9}))?(?=[\s\]|,])")


@dataclass(frozen=True)
class Stamp:
    kind: str
    start: int
    end: int
    seconds: float | None  # None: shaped like a stamp, but not a real date or time


def _frac(text: str | None) -> float:
    return float("0." + text) if text else 0.0


def _utc(year: int, month: int, day: int, h: int, mi: int, s: int) -> float | None:
    try:
        return dt.datetime(year, month, day, h, mi, s, tzinfo=dt.timezone.utc).timestamp()
    except (ValueError, OverflowError):
        return None


def _zone(text: str | None) -> float:
    if not text or text == "Z":
        return 0.0
    sign = -1.0 if text[0] == "-" else 1.0
    digits = text[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


def match_stamp(line: str, pos: int = 0) -> Stamp | None:
    """The timestamp starting exactly at ``pos``, if any."""
    c = line[pos : pos + 1]
    if not c:
        return None
    if c.isdigit():
        m = _ISO.match(line, pos)
        if m:
            y, mo, d, h, mi, s, frac, zone = m.groups()
            base = _utc(int(y), int(mo), int(d), int(h), int(mi), int(s))
            secs = None if base is None else base + _frac(frac) - _zone(zone)
            return Stamp("iso", pos, m.end(), secs)
        m = _MONTH_DAY.match(line, pos)
        if m:
            mo, d, h, mi, s, frac = m.groups()
            base = _utc(2000, int(mo), int(d), int(h), int(mi), int(s))
            return Stamp("md", pos, m.end(), None if base is None else base + _frac(frac))
        m = _HMS.match(line, pos)
        if m:
            h, mi, s, frac = m.groups()
            ok = int(h) < 24 and int(mi) < 60 and int(s) < 61
            secs = int(h) * 3600 + int(mi) * 60 + int(s) + _frac(frac) if ok else None
            return Stamp("hms", pos, m.end(), secs)
        m = _EPOCH.match(line, pos)
        if m:
            return Stamp("epoch", pos, m.end(), float(m.group(0)))
        return None
    if c in "IWEF":
        m = _GLOG.match(line, pos)
        if m:
            mo, d, h, mi, s, frac = m.groups()
            base = _utc(2000, int(mo), int(d), int(h), int(mi), int(s))
            return Stamp("glog", pos, m.end(), None if base is None else base + _frac(frac))
    if c.isalpha():
        m = _SYSLOG.match(line, pos)
        if m:
            mon, d, h, mi, s, frac, year = m.groups()
            month = _MONTHS.index(mon[:3].lower()) + 1
            base = _utc(int(year or 2000), month, int(d), int(h), int(mi), int(s))
            return Stamp("syslog", pos, m.end(), None if base is None else base + _frac(frac))
    return None


def stamp_seconds(kind: str, text: str) -> float | None:
    """Seconds of a stamp's text (as :func:`match_stamp` reads it)."""
    got = match_stamp(text)
    return got.seconds if got is not None and got.kind == kind else None


# -- many stamps at once ----------------------------------------------------------------------------------
# A fixed-width stamp (Python ``logging``'s ``%(asctime)s`` always is) decodes as a column: its digits at
# fixed offsets. ``datetime`` per stamp held timestamped logs to about a third of the plain-text rate.
_FIELDS = {
    "iso": ("Y", "M", "D", "h", "m", "s"),
    "glog": ("M", "D", "h", "m", "s"),
    "md": ("M", "D", "h", "m", "s"),
    "hms": ("h", "m", "s"),
}


@dataclass(frozen=True)
class StampLayout:
    """Where each part of a stamp sits in its text, learned from one stamp; ``decode`` reads a column of
    stamps of the same layout (and says None when one does not fit it)."""

    kind: str
    text: bytes
    digits: tuple[tuple[str, int, int], ...]  # (field, start, end) within the stamp
    frac: tuple[int, int] | None
    zone_seconds: float

    @classmethod
    def learn(cls, kind: str, text: str) -> StampLayout | None:
        if kind not in _FIELDS or not text.isascii():
            return None
        runs = [(m.start(), m.end()) for m in re.finditer(r"\d+", text)]
        if kind == "glog":
            runs = [(1, 3), (3, 5), *runs[1:]]
        names = _FIELDS[kind]
        if len(runs) < len(names):
            return None
        digits = tuple((name, a, b) for name, (a, b) in zip(names, runs[: len(names)], strict=True))
        rest = runs[len(names) :]
        frac: tuple[int, int] | None = None
        zone = 0.0
        if rest and text[rest[0][0] - 1] in ".,":
            frac = rest[0]
            rest = rest[1:]
        if kind == "iso":
            tail = text[frac[1] if frac else digits[-1][2] :]
            if tail and tail != "Z":
                if not re.fullmatch(r"[+-]\d{2}:?\d{2}", tail):
                    return None
                zone = _zone(tail)
        elif rest:
            return None
        return cls(kind, text.encode(), digits, frac, zone)

    @property
    def width(self) -> int:
        return len(self.text)

    def decode(self, block: np.ndarray) -> np.ndarray | None:
        """Seconds for each row of an (n, width) uint8 array of stamps; None if any row differs in layout
        or is no real date/time."""
        proto = np.frombuffer(self.text, dtype=np.uint8)
        is_digit = (proto >= 48) & (proto <= 57)
        got_digit = (block >= 48) & (block <= 57)
        if not (got_digit[:, is_digit].all() and (block[:, ~is_digit] == proto[~is_digit]).all()):
            return None
        num = block.astype(np.int64) - 48
        parts: dict[str, np.ndarray] = {}
        for name, a, b in self.digits:
            value = np.zeros(block.shape[0], dtype=np.int64)
            for k in range(a, b):
                value = value * 10 + num[:, k]
            parts[name] = value
        h, mi, s = parts["h"], parts["m"], parts["s"]
        if (h > 23).any() or (mi > 59).any() or (s > 60).any():
            return None
        secs = (h * 3600 + mi * 60 + s).astype(np.float64)
        if self.frac is not None:
            a, b = self.frac
            frac = np.zeros(block.shape[0], dtype=np.int64)
            for k in range(a, b):
                frac = frac * 10 + num[:, k]
            secs += frac / 10.0 ** (b - a)
        if self.kind == "hms":
            return np.asarray(secs, dtype=np.float64)
        month, day = parts["M"], parts["D"]
        year = parts["Y"] if "Y" in parts else np.full(block.shape[0], 2000, dtype=np.int64)
        if ((month < 1) | (month > 12) | (day < 1) | (day > _days_in_month(year, month))).any():
            return None
        days = _days_from_civil(year, month, day)
        return np.asarray(days * 86400 + secs - self.zone_seconds, dtype=np.float64)


def _days_in_month(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    days = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)[
        np.clip(month, 1, 12) - 1
    ]
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    return np.asarray(days + ((month == 2) & leap))


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (vectorized; H. Hinnant's algorithm)."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return np.asarray(era * 146097 + doe - 719468)


def unwrap_days(wall: np.ndarray) -> np.ndarray:
    """``[HH:MM:SS]`` stamps: a jump back of more than 12 hours is midnight."""
    ok = np.flatnonzero(np.isfinite(wall))
    if ok.size < 2:
        return wall
    back = np.diff(wall[ok]) < -43200
    if not back.any():
        return wall
    out = np.array(wall, dtype=np.float64)
    out[ok[1:]] += np.cumsum(back) * 86400.0
    return out


__all__ = ["Stamp", "StampLayout", "match_stamp", "stamp_seconds", "unwrap_days"]
