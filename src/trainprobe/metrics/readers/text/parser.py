"""Reading a text log: chunks of lines through templates where they fit, line by line where they do not.

A line read one by one goes: prefix (:mod:`.prefix`: timestamp, level, logger, rank, host) → tokens
(:mod:`.tokens`) → fields (:mod:`.fields`) → a metric row, a continuation of the record above it, an event
(:mod:`trainprobe.metrics.events`), or a skipped line with the reason why. A metric row read that way
teaches a template (:mod:`.template`), and the lines of its shape in later chunks are read in bulk (rows
keep their line number: bulk blocks and single rows interleave as in the file)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.coverage import ShapeCounter, has_digit
from trainprobe.metrics.events import Event, event_from_line, merge_saves
from trainprobe.metrics.readers.text.bulk import split_lines
from trainprobe.metrics.readers.text.chunks import MAX_LINE, LineChunks, clean_chunk, clean_line
from trainprobe.metrics.readers.text.clock import unwrap_days
from trainprobe.metrics.readers.text.columns import ColumnTables, header_names
from trainprobe.metrics.readers.text.fields import COUNTER_KEY, Fields, read_fields
from trainprobe.metrics.readers.text.kv_table import KeyValueTable
from trainprobe.metrics.readers.text.pattern import pattern_row
from trainprobe.metrics.readers.text.prefix import split_prefix
from trainprobe.metrics.readers.text.prose import ProseIndex
from trainprobe.metrics.readers.text.rows import (
    ONE_FIELD,
    column_names,
    is_eval_banner,
    may_matter,
    units_of,
    why_not_metrics,
)
from trainprobe.metrics.readers.text.tagged_json import TaggedJson
from trainprobe.metrics.readers.text.template import Template, template_of_line
from trainprobe.metrics.splits import is_epoch_key, is_step_key
from trainprobe.metrics.table import ColumnBuilder, RunLog, Unread
from trainprobe.metrics.user_regex import MAX_USER_LINE

_MAX_TEMPLATES = 8
_LEARN_TRIES = 400
_SAMPLES = 12
_MIN_BULK_BYTES = 4096


@dataclass
class _Record:
    """The row being built from a header line and the lines under it."""

    order: int
    values: dict[str, float]
    wall: float
    last_order: int
    in_eval: bool = False  # opened under an eval's banner: its next lines are eval fields too


class LineParser:
    """Incremental parser: ``feed_chunk`` (bytes of complete lines) or ``feed_line``, then ``run()`` for the
    columns so far. ``line_pattern`` (named groups: ``step`` and any metric) replaces the tokenizer."""

    def __init__(
        self,
        name: str,
        path: str,
        *,
        event_patterns: list[re.Pattern[str]] | None = None,
        line_pattern: re.Pattern[str] | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.builder = ColumnBuilder()
        self.events: list[Event] = []
        self.skipped = 0
        self.samples: list[Unread] = []
        self.templates: list[Template] = []
        self._event_patterns = event_patterns or []
        self._line_pattern = line_pattern
        self._line_no = 0
        self._tries = 0
        self._record: _Record | None = None
        self._hms = False
        self._last_row = -2
        self._eval_banner = -2
        self._bulk_flags: tuple[int, bytearray] = (0, bytearray())
        self._columns = ColumnTables()
        self.shapes = ShapeCounter()  # what was and was not read, by line shape (RunLog.coverage)
        self._tagged = TaggedJson()  # lines of a tag and a JSON object (``:::MLLOG {...}``)
        self._table = KeyValueTable()  # a record as a table of ``| key | value |`` lines

    # -- one line ------------------------------------------------------------------------------------------
    def feed_line(self, line: str) -> None:
        """One line (a ``str``): of a line a progress bar rewrote with ``\\r``, the last rewrite."""
        self._read_line(clean_line(line), self._line_no, None)
        self._line_no += 1

    def _skip(self, order: int, text: str, why: str) -> None:
        self.skipped += 1
        self._note(order, text, why)

    def _note(self, order: int, text: str, why: str) -> None:
        if len(self.samples) < _SAMPLES:
            self.samples.append(Unread(order + 1, text[:160], why))

    def _read_line(self, text: str, order: int, raw: bytes | None) -> None:
        if not text.strip():
            return
        if len(text) > MAX_LINE:
            self._skip(order, text, f"longer than {MAX_LINE} characters")
            return
        if self._line_pattern is not None:
            self._read_with_pattern(text, order)
            return
        prefix = split_prefix(text)
        stamp = prefix.stamp
        wall = np.nan if stamp is None or stamp.seconds is None else stamp.seconds
        if stamp is not None and stamp.kind == "hms":
            self._hms = True
        body = text[prefix.body_start :]
        if self._tagged_row(body, order, wall) or self._table_line(body, order, wall):
            return
        self._columns.see_line(body, order)  # a header line is read as any other too (it may be an event)
        fields = read_fields(body)
        why = why_not_metrics(fields, body)
        eval_context = self._eval_banner == order - 1
        named = sum(not k.startswith("#") for k in fields.values)
        if eval_context and fields.values and not named:
            self._eval_banner = order  # an eval's progress bars: the banner holds for the lines under them
        if named <= 1:  # a class name in the first cell reads as one field
            row = self._columns.row(body, order)
            if row is not None:
                self._close_record()
                self._last_row = order
                self._record = _Record(order, row, wall, order)
                self.shapes.read(1)
                return
        if why is None or (why.startswith(ONE_FIELD) and (eval_context or self._after_row(order))):
            if why is not None or not any(not k.startswith("#") for k in fields.values):
                # kept (a record's next line, a progress counter), and said, should the log hold no metric
                self._note(order, text, why or "a progress counter and no named field")
                self.shapes.unnamed(body, order + 1, fields.unnamed(body))
            self._add_fields(fields, order, wall, eval_context=eval_context)
            if why is None and not eval_context:
                self._learn(fields, text, raw, prefix.body_start, stamp)
            return
        event = event_from_line(body, self._event_patterns, order=order, wall=None if wall != wall else wall)
        if event is not None:
            self._close_record()
            self.events.append(event)
            self.shapes.numeric_lines += has_digit(body)
            return
        if is_eval_banner(fields):
            self._eval_banner = order
        if has_digit(body):
            self.shapes.unread(body, order + 1)
        self._skip(order, text, why)

    def _tagged_row(self, body: str, order: int, wall: float) -> bool:
        """Whether the line is a tag and a JSON object (read: a row, or a record that is no row)."""
        if (got := self._tagged.read(body)) is None:
            return False
        self.shapes.read(1)
        if got[0]:
            self._close_record()
            self._last_row = order
            self.builder.add_row(got[0], order=order, wall=got[1] if got[1] == got[1] else wall)
        return True

    def _table_line(self, body: str, order: int, wall: float) -> bool:
        """Whether the line is one of a key/value table (:mod:`.kv_table`); the records it ended are rows."""
        if body.lstrip()[:1] != "|" or (done := self._table.read(body, order, wall)) is None:
            return False
        self.shapes.read(has_digit(body))
        self._add_table_rows(done)
        return True

    def _add_table_rows(self, done: list[tuple[dict[str, float], int, float]]) -> None:
        for values, at, when in done:
            self.builder.add_row(values, order=at, wall=when)

    def _read_with_pattern(self, text: str, order: int) -> None:
        assert self._line_pattern is not None
        if len(text) > MAX_USER_LINE:  # a user regex's time stays bounded on a line this long
            self._skip(order, text, f"longer than {MAX_USER_LINE} characters: --pattern not tried")
            return
        m = self._line_pattern.search(text)
        if m is None:
            event = event_from_line(text, self._event_patterns, order=order)
            if event is not None:
                self.events.append(event)
            else:
                self._skip(order, text, "does not match --pattern")
            return
        row = pattern_row(m)
        if not row:
            self._skip(order, text, "--pattern matched, but no group holds a number")
            return
        self.builder.add_row(row, order=order)
        self.shapes.read(1)

    def _split_keys(self, fields: Fields, *, eval_context: bool = False) -> dict[str, float]:
        names = column_names(fields, eval_context=eval_context)
        return {names[k]: v for k, v in fields.values.items()}

    def _after_row(self, order: int) -> bool:
        """Whether the line before ``order`` gave a metric row (read one by one or in bulk)."""
        if self._last_row == order - 1:
            return True
        base, flags = self._bulk_flags
        i = order - 1 - base
        return 0 <= i < len(flags) and bool(flags[i])

    def _add_fields(self, fields: Fields, order: int, wall: float, *, eval_context: bool) -> None:
        rec = self._record
        has_step = any(is_step_key(k) or is_epoch_key(k) or k == COUNTER_KEY for k in fields.values)
        follows = rec is not None and not has_step and order == rec.last_order + 1
        # a record's next line is of the record's split (an eval's progress bar, then ``mAP: …``, ``CP: …``)
        values = self._split_keys(
            fields, eval_context=eval_context or (rec is not None and follows and rec.in_eval)
        )
        for key, unit in units_of(fields).items():
            self.builder.units.setdefault(key, unit)
        self._last_row = order
        self.shapes.read(1)
        if rec is not None and follows and not any(k in rec.values for k in values):
            # the next line of a record (a header with the step, then lines of fields under it)
            rec.values.update(values)
            rec.last_order = order
            return
        self._close_record()
        self._record = _Record(order, values, wall, order, eval_context)

    def _close_record(self) -> None:
        rec = self._record
        if rec is not None:
            self.builder.add_row(rec.values, order=rec.order, wall=rec.wall)
            self._record = None

    def _learn(self, fields: Fields, text: str, raw: bytes | None, body_start: int, stamp: object) -> None:
        if len(self.templates) >= _MAX_TEMPLATES or self._tries >= _LEARN_TRIES or not fields.exact:
            return
        self._tries += 1
        line = raw if raw is not None else text.encode("utf-8", "replace")
        if len(line) != len(text):
            return  # non-ASCII: byte and character offsets differ
        names = column_names(fields)
        slots = [
            (body_start + s.start, body_start + s.end, None if s.key is None else names.get(s.key, s.key))
            for s in fields.slots
        ]
        made = template_of_line(line, text, slots, stamp)
        if made is not None and made not in self.templates and made.reads_as(line, self._split_keys(fields)):
            self.templates.append(made)

    # -- many lines ----------------------------------------------------------------------------------------
    def feed_chunk(self, chunk: bytes) -> None:
        """Complete lines (no trailing newline)."""
        chunk = clean_chunk(chunk)
        base = self._line_no
        if self.templates and len(chunk) >= _MIN_BULK_BYTES and self._line_pattern is None:
            got = self.templates[0].read_block(chunk, None)
            if got is not None:
                n = got[0].shape[0]
                self._close_record()
                self._add_block(self.templates[0], got, np.arange(base, base + n, dtype=np.float64))
                self._bulk_flags = (base, bytearray(b"\x01") * n)
                self._line_no += n
                return
        lines = chunk.split(b"\n")
        n = len(lines)
        prose = ProseIndex(lines) if not self._event_patterns and self._line_pattern is None else None
        if not self.templates or self._line_pattern is not None:
            # learn from the first lines, then read the rest of the chunk with what was learnt
            i = 0
            while i < n and (not self.templates or self._line_pattern is not None):
                if prose is not None and prose.is_prose(i):  # a stretch of prose, skipped as one
                    i = self._skip_prose(lines, base, i, prose.prose_until(i))
                    continue
                self._read_raw(lines[i], base + i)
                i += 1
            self._line_no = base + i
            if i < n:
                self.feed_chunk(b"\n".join(lines[i:]))
            return
        self._line_no += n
        self._read_lines(lines, base, prose)

    def _skip_prose(self, lines: list[bytes], base: int, start: int, stop: int) -> int:
        """Lines ``start`` to ``stop`` are prose: counted skipped (blank ones not), the first noted."""
        for i in range(start, stop):
            if len(self.samples) >= _SAMPLES:
                self.skipped += sum(1 for raw in lines[i:stop] if raw.strip())
                break
            self._read_raw(lines[i], base + i, prose=True)
        return stop

    def _read_raw(self, raw: bytes, order: int, *, prose: bool = False) -> None:
        if prose and len(raw) <= MAX_LINE and raw[:1] != b"|":  # (trainprobe.metrics.readers.text.prose)
            if raw.strip():
                self.skipped += 1
                if len(self.samples) < _SAMPLES:
                    self._note(order, raw.decode("utf-8", "replace"), "no numbers")
            return
        text = raw.decode("utf-8", "replace")
        if (
            len(raw) <= MAX_LINE
            and raw[:1] != b"|"  # a key/value table's section line (:mod:`.kv_table`)
            and not may_matter(raw)
            and not self._event_patterns
            and self._line_pattern is None
            and header_names(text) is None
        ):
            # prose: no number (so no row), no word an event or an eval banner needs, not a table header —
            # rejected at about the cost of a metric line, not read field by field
            if text.strip():
                self._skip(order, text, "no numbers")
            return
        self._read_line(text, order, raw if raw.isascii() else None)

    def _read_lines(self, lines: list[bytes], base: int, prose: ProseIndex | None) -> None:
        rest, bulk = split_lines(self.templates, lines)
        if 4 * len(rest) < len(lines):  # a few odd lines among bulk ones: not worth a pass over all
            prose = None
        flags = bytearray(len(lines))
        for item in bulk:
            for i in item.lines:
                flags[i] = 1
        self._bulk_flags = (base, flags)
        blocks = iter(sorted(bulk, key=lambda b: b.lines[0]))
        pending = next(blocks, None)
        for i in rest:
            while pending is not None and pending.lines[0] < i:
                self._close_record()
                self._add_block(
                    pending.template, pending.got, base + np.asarray(pending.lines, dtype=np.float64)
                )
                pending = next(blocks, None)
            self._read_raw(lines[i], base + i, prose=prose is not None and prose.is_prose(i))
        while pending is not None:
            self._close_record()
            self._add_block(pending.template, pending.got, base + np.asarray(pending.lines, dtype=np.float64))
            pending = next(blocks, None)

    def _add_block(
        self, template: Template, got: tuple[np.ndarray, np.ndarray | None], order: np.ndarray
    ) -> None:
        values, walls = got
        if template.stamp is not None and template.stamp.kind == "hms":
            self._hms = True
        self.builder.add_block(template.columns, values, order=order, wall=walls)
        self.shapes.read(int(order.shape[0]))

    def feed_row(self, row: dict[str, float]) -> None:
        """A row read elsewhere (a JSON object line in a followed log), in line order."""
        self._close_record()
        self.builder.add_row(row, order=self._line_no)
        self._line_no += 1

    def run(self, *, final: bool = True) -> RunLog:
        """The run so far; ``final=False`` keeps the parser going (more lines may follow)."""
        self._close_record()
        self._add_table_rows(self._table.flush())
        events = merge_saves([replace(e) for e in self.events])
        run = finish_run(
            self.builder,
            name=self.name,
            path=self.path,
            fmt="text",
            events=events,
            skipped_lines=self.skipped,
            consume=final,
        )
        if self._hms and run.wall is not None:
            run.wall = unwrap_days(run.wall)
        run.unread = list(self.samples)
        run.coverage = self.shapes.coverage()
        return run


def read_text_file(
    path: Path,
    *,
    name: str,
    event_patterns: list[re.Pattern[str]] | None = None,
    line_pattern: re.Pattern[str] | None = None,
) -> RunLog:
    parser = LineParser(name, str(path), event_patterns=event_patterns, line_pattern=line_pattern)
    chunks = LineChunks(path)
    for chunk in chunks:
        parser.feed_chunk(chunk)
    for _ in range(chunks.overlong):
        parser._skip(-1, "", f"a line longer than {MAX_LINE} bytes")
    return parser.run()


__all__ = ["LineParser", "read_text_file"]
