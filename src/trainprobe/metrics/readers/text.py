"""Plain-text training logs: fields found per line (``key: value``, ``key=value``, ``key value``,
``key:value``, ``|``-separated Megatron lines, llm.c ``s:N trl:X``), timestamps at line starts, event lines
kept as events.

Speed: the first metric line's shape becomes a per-file regex (keys and separators literal, numbers captured)
that ``re.findall`` runs over multi-megabyte chunks; lines that do not fit fall back to the general per-line
parser.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from trainprobe.metrics.events import Event, classify_line
from trainprobe.metrics.readers._fastnum import split_uniform
from trainprobe.metrics.table import ColumnBuilder, RunLog, finish_run, is_step_key

NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"
_UNIT = r"(?:\s*/\s*\d+)?(?P<unit>[A-Za-z%]+)?"
_PAIR = re.compile(
    r"(?<![\w./])(?P<key>[A-Za-z_][\w./\-]*)(?:\s*[:=]\s*|\s+)(?P<val>" + NUM + r")" + _UNIT + r"(?![\w.])"
)
_SEGMENT = re.compile(
    r"^\s*(?P<key>[A-Za-z_][\w ./()\-]*?)\s*(?:[:=]\s*|\s+)(?P<val>" + NUM + r")" + _UNIT + r"\s*$"
)
_TS = re.compile(
    r"^\s*(?:\[?(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\]?"
    r"|\[(?P<hms>\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?)\]"
    r"|(?P<glog>[IWEF]\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?)(?:\s+\d+)?\s+[^\s\]]+:\d+\]"
    r"|(?P<epoch>1\d{9}(?:\.\d+)?)(?=\s))\s*(?:[-|:]\s*)?"
)
_TS_KINDS = ("iso", "hms", "glog", "epoch")
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE|TRACE|SUCCESS)"
# What loggers put between the timestamp and the message: ``INFO``, ``[INFO]``, ``INFO:root:``, ``| INFO |``
# (loguru, with its ``module:function:line -``), ``root - INFO -``, Hydra's ``[__main__][INFO] -``. Kept out
# of the fields, else "INFO" lowers a line's coverage and a level-only line ("INFO:root:...") reads as prose.
_PREFIX = re.compile(
    r"\s*(?:"
    r"(?:\[[A-Za-z_][\w.<>-]{0,59}\]\s*)+(?:-\s+|:\s*)?"
    r"|\|?\s*" + _LEVEL + r"\s*\|(?:\s*[\w.<>]+:[\w.<>]+:\d+\s+-)?\s*"
    r"|(?:[\w.<>]+\s+-\s+)?" + _LEVEL + r"\s+-\s+"
    r"|" + _LEVEL + r"(?::[\w.<>-]*)*:\s*"
    r"|" + _LEVEL + r"\b\s*(?:[-|:]\s+)?"
    r")"
)
_KNOWN_UNITS = frozenset({"ms", "s", "us", "min", "h", "x", "it", "k", "m", "g", "b"})
_CHUNK = 8 << 20


def _ts_kind(m: re.Match[str]) -> str:
    return next(kind for kind in _TS_KINDS if m.group(kind))


def _parse_ts(m: re.Match[str]) -> tuple[str, float]:
    kind = _ts_kind(m)
    return kind, ts_value(kind, m.group(kind))


def _body_start(line: str, ts: re.Match[str] | None) -> int:
    """Where the message starts: after the timestamp and any logger prefix (level, logger name)."""
    start = ts.end() if ts else 0
    prefix = _PREFIX.match(line, start)
    return prefix.end() if prefix else start


def ts_value(kind: str, text: str) -> float:
    """Seconds for a timestamp's text: ISO (UTC unless it says), ``HH:MM:SS`` of the day, glog/absl
    ``I1129 22:36:21.226`` (no year in it: taken as 2000, a leap year, so only gaps are meaningful), or epoch
    seconds."""
    if kind == "iso":
        stamp = dt.datetime.fromisoformat(text.replace(",", ".").replace("Z", "+00:00"))
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        return stamp.timestamp()
    if kind == "hms":
        h, mi, s = text.replace(",", ".").split(":")
        return int(h) * 3600 + int(mi) * 60 + float(s)
    if kind == "glog":
        month, day, clock = int(text[1:3]), int(text[3:5]), text[6:]
        h, mi, s = clock.split(":")
        midnight = dt.datetime(2000, month, day, tzinfo=dt.timezone.utc).timestamp()
        return midnight + int(h) * 3600 + int(mi) * 60 + float(s)
    return float(text)


def iso_seconds(stamps: list[str]) -> np.ndarray | None:
    """Seconds for many ISO timestamps without a zone (taken as UTC, as ``ts_value`` does) in one numpy parse;
    None when some carry a zone or do not parse, for the per-stamp path. ``datetime.fromisoformat`` per stamp
    held Python-logging logs to about 0.2 M lines/s."""
    joined = "\n".join(stamps).replace(",", ".")
    if "Z" in joined or "+" in joined or joined.count("-") != 2 * len(stamps):
        return None
    try:
        parsed = np.array(joined.split("\n"), dtype="datetime64[us]")
    except ValueError:
        return None
    return parsed.astype(np.int64) / 1e6


_TS_KIND_RE = {
    "iso": r"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)",
    "hms": r"(\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?)",
    "glog": r"([IWEF]\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?)",
    "epoch": r"(1\d{9}(?:\.\d+)?)",
}


def parse_fields(body: str) -> tuple[dict[str, float], dict[str, str], float]:
    """Fields in one line (without its timestamp): values, units, and the share of the line they cover."""
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    covered = 0
    if "|" in body:
        segments = [seg for seg in body.split("|") if seg.strip()]
        for seg in segments:
            m = _SEGMENT.match(seg)
            if m:
                _store(m, values, units)
                covered += _solid(seg)
        if len(values) < 2:
            return {}, {}, 0.0
        # Segments that are not fields (a run name, a date) are fine in a Megatron-style line.
        return values, units, 1.0
    for pm in _PAIR.finditer(body):
        _store(pm, values, units)
        covered += _solid(pm.group(0))
    size = _solid(body.replace("|", "")) or 1
    return values, units, covered / size


def _solid(text: str) -> int:
    return len(text) - text.count(" ") - text.count("\t")


def _store(m: re.Match[str], values: dict[str, float], units: dict[str, str]) -> None:
    key = re.sub(r"\s+", " ", m.group("key").strip())
    if key in values:
        return
    values[key] = float(m.group("val"))
    unit = m.group("unit")
    if unit:
        units[key] = unit


def _is_metric_line(values: dict[str, float], coverage: float) -> bool:
    # Most of the line must be fields: prose, echoed source and tracebacks hold a stray "x = 1" or "line 12".
    if not values or coverage < 0.8:
        return False
    return len(values) >= 2 or any(is_step_key(k) for k in values)


# Separators allowed between fields in a templated line (Hydra-style "step: 5, loss: 2.1").
_BETWEEN_FIELDS = " \t,;"

Template = tuple[re.Pattern[str], tuple[str, ...], list[str] | None]


def _value_spans(body: str) -> list[tuple[str, int, int]] | None:
    """(key, start, end) of each value in a metric line; None if the line has text between fields."""
    spans: list[tuple[str, int, int]] = []
    if "|" in body:
        offset = 0
        for seg in body.split("|"):
            m = _SEGMENT.match(seg)
            if m:
                spans.append(
                    (
                        re.sub(r"\s+", " ", m.group("key").strip()),
                        offset + m.start("val"),
                        offset + m.end("val"),
                    )
                )
            offset += len(seg) + 1
        return spans
    pos = 0
    for m in _PAIR.finditer(body):
        if body[pos : m.start()].strip(_BETWEEN_FIELDS):
            return None
        spans.append((re.sub(r"\s+", " ", m.group("key")), m.start("val"), m.end("val")))
        pos = m.end()
    return spans if not body[pos:].strip(_BETWEEN_FIELDS) else None


def _template(line: str, ts: re.Match[str] | None) -> Template | None:
    """A regex matching lines shaped like ``line`` (same keys and separators, any spacing), numbers
    captured; and the literal pieces between the numbers, for the split fast path when spacing is fixed
    too."""
    body_start = _body_start(line, ts)
    body = line[body_start:]
    spans = _value_spans(body)
    if not spans or len({k for k, _, _ in spans}) != len(spans):
        return None
    keys: list[str] = []
    parts: list[str] = ["^"]
    if ts is not None:
        kind = _ts_kind(ts)
        parts.append(
            _loose(line[: ts.start(kind)]) + _TS_KIND_RE[kind] + _loose(line[ts.end(kind) : body_start])
        )
        keys.append("\x00ts:" + kind)
    else:
        parts.append(_loose(line[:body_start]))
    pieces: list[str] = []
    pos = 0
    for key, start, end in spans:
        pieces.append(body[pos:start])
        parts.append(_loose(body[pos:start]) + "(" + NUM + ")")
        keys.append(key)
        pos = end
    pieces.append(body[pos:])
    pieces[0] = line[:body_start] + pieces[0]
    parts.append(_loose(body[pos:].rstrip()) + r"[ \t\r]*$")
    return re.compile("".join(parts), re.M), tuple(keys), (pieces if ts is None else None)


def _loose(literal: str) -> str:
    """``literal`` as a regex where any run of spaces may be any run of spaces (Megatron pads its numbers)."""
    return r"\s*".join(re.escape(p) for p in re.split(r"[ \t]+", literal))


class LineParser:
    """Incremental parser: ``feed`` complete lines (or big chunks), then ``run()`` for the columns so far."""

    def __init__(self, name: str, path: str, *, event_patterns: list[re.Pattern[str]] | None = None) -> None:
        self.name = name
        self.path = path
        self.builder = ColumnBuilder()
        self.wall: list[np.ndarray] = []
        self.events: list[Event] = []
        self.skipped = 0
        self._event_patterns = event_patterns or []
        self._templates: list[Template] = []
        self._template_tried = 0
        self._last_step = 0.0
        self._hms_day = 0.0
        self._hms_last = -1.0
        self._last_wall = np.nan

    # -- rows -----------------------------------------------------------------------------------------------
    def _wall_of(self, kind: str, value: float) -> float:
        if kind != "hms":
            return value
        if value < self._hms_last:  # [HH:MM:SS] wrapped past midnight
            self._hms_day += 86400.0
        self._hms_last = value
        return value + self._hms_day

    def feed_line(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if not line.strip():
            return
        ts = _TS.match(line)
        wall = np.nan
        body = line
        if ts:
            kind, value = _parse_ts(ts)
            wall = self._wall_of(kind, value)
        body = line[_body_start(line, ts) :]
        values, units, coverage = parse_fields(body)
        if _is_metric_line(values, coverage):
            for k in values:
                if is_step_key(k):
                    self._last_step = values[k]
                    break
            for k, u in units.items():
                self.builder.units.setdefault(k, u)
            self.builder.add_row(values)
            self.wall.append(np.array([wall]))
            self._last_wall = wall
            if len(self._templates) < 4 and self._template_tried < 50:
                self._template_tried += 1
                made = _template(line, ts)
                if made is not None and made[0].fullmatch(line):
                    self._templates.append(made)
            return
        event = classify_line(body, self._event_patterns)
        if event is not None:
            kind, step = event
            self.events.append(
                Event(
                    kind,
                    step if step is not None else self._last_step,
                    self.builder.n_rows,
                    text=body.strip()[:200],
                    wall=None if np.isnan(wall) else float(wall),
                )
            )
            return
        self.skipped += 1

    def feed_chunk(self, chunk: str) -> None:
        """Complete lines only. Uses the per-file templates: one ``findall`` when every line fits the
        first."""
        if self._templates and len(chunk) > 4096:
            pattern, keys, pieces = self._templates[0]
            if pieces is not None:
                block = split_uniform(chunk, pieces, len(keys))
                if block is not None:
                    self._add_block(keys, block, np.full(block.shape[0], np.nan))
                    return
            rows = pattern.findall(chunk)
            n_lines = chunk.count("\n") + (0 if chunk.endswith("\n") else 1)
            if len(rows) == n_lines and rows:
                self._add_template_rows(rows, keys)
                return
        pending: list[tuple[str, ...]] = []
        current = -1
        for line in chunk.splitlines():
            for t, (pattern, _keys, _pieces) in enumerate(self._templates):
                m = pattern.fullmatch(line)
                if m:
                    if t != current and pending:
                        self._add_template_rows(pending, self._templates[current][1])
                        pending = []
                    current = t
                    pending.append(m.groups())
                    break
            else:
                if pending:
                    self._add_template_rows(pending, self._templates[current][1])
                    pending = []
                self.feed_line(line)
        if pending:
            self._add_template_rows(pending, self._templates[current][1])

    def _add_template_rows(self, rows: list[tuple[str, ...]] | list[str], keys: tuple[str, ...]) -> None:
        if keys and keys[0].startswith("\x00ts:"):
            kind = keys[0][4:]
            tuples = [r for r in rows if isinstance(r, tuple)]
            stamps = [r[0] for r in tuples]
            fast = iso_seconds(stamps) if kind == "iso" else None
            walls = (
                fast
                if fast is not None
                else np.array([self._wall_of(kind, ts_value(kind, s)) for s in stamps], dtype=np.float64)
            )
            values = np.array([r[1:] for r in tuples], dtype=np.float64).reshape(len(tuples), len(keys) - 1)
            mkeys = keys[1:]
        else:
            values = np.array(rows, dtype=np.float64).reshape(len(rows), len(keys))
            walls = np.full(len(rows), np.nan)
            mkeys = keys
        self._add_block(mkeys, values, walls)

    def _add_block(self, mkeys: tuple[str, ...], values: np.ndarray, walls: np.ndarray) -> None:
        self.builder.add_block(mkeys, values)
        self.wall.append(walls)
        for j, k in enumerate(mkeys):
            if is_step_key(k) and len(values):
                self._last_step = float(values[-1, j])
                break

    def run(self) -> RunLog:
        wall = np.concatenate(self.wall) if self.wall else np.empty(0)
        cols_builder = self.builder
        return finish_run(
            cols_builder,
            name=self.name,
            path=self.path,
            fmt="text",
            wall=wall,
            events=list(self.events),
            skipped_lines=self.skipped,
        )


def iter_line_chunks(path: Path, size: int = _CHUNK) -> Iterator[str]:
    """The file as big strings of complete lines (no trailing newline), so no line is split between two."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        rest = ""
        while True:
            block = fh.read(size)
            if not block:
                break
            block = rest + block
            cut = block.rfind("\n")
            if cut < 0:
                rest = block
                continue
            rest = block[cut + 1 :]
            if cut:
                yield block[:cut]
        if rest.strip():
            yield rest


def read_text_file(path: Path, *, name: str, event_patterns: list[re.Pattern[str]] | None = None) -> RunLog:
    parser = LineParser(name, str(path), event_patterns=event_patterns)
    for chunk in iter_line_chunks(path):
        parser.feed_chunk(chunk)
    return parser.run()


class TextReader:
    """Any line-oriented text log; the fallback reader, so it accepts anything with a metric line in its
    head."""

    name = "text"

    def sniff(self, path: Path, head: bytes) -> bool:
        try:
            text = head.decode("utf-8", errors="replace")
        except Exception:  # pragma: no cover
            return False
        return "\x00" not in text

    def read(self, path: Path, *, event_patterns: list[re.Pattern[str]] | None = None) -> list[RunLog]:
        return [read_text_file(path, name=path.stem, event_patterns=event_patterns)]
