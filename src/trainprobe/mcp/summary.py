"""Short text summaries of the tools' JSON documents, sized for a model's context: :class:`Summary` and the
summaries of the library's documents (``probe`` and ``run``: :mod:`trainprobe.mcp.summary_remote`).

The most important lines come first (verdict, counts, the worst findings), lists stop after a few entries
with a line saying how many were left out, and the last line names the full report's file. Nothing is cut
silently: a summary over :data:`MAX_CHARS` ends at a whole line and says how much more the report holds.

The summaries read the documents with ``.get``: the library's schemas are growing (checkpoint units, new log
readers), and a summary must still say what it can when a field moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
MAX_CHARS = 6000
MAX_LINE = 300
_CUT_NOTE_CHARS = 120  # room kept for the line that says the summary was cut
_IDENTITY = ("byte-identical copies: ", "the same tensors (not the same bytes): ", "step disagreement: ")


def short(text: Any, limit: int = MAX_LINE) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def step_text(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return "?" if x is None else str(x)


def counts_text(counts: dict[str, Any] | None) -> str:
    return ", ".join(f"{n} {what}" for what, n in (counts or {}).items() if n) or "none"


class Summary:
    """Lines of a summary; :meth:`items` lists the first few of a sequence and how many more there are."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str = "") -> None:
        self.lines.append(line)

    def items(self, items: Sequence[T], render: Callable[[T], list[str]], *, limit: int, what: str) -> None:
        for item in items[:limit]:
            self.lines.extend(render(item))
        if len(items) > limit:
            self.lines.append(f"… {len(items) - limit} more {what} in the full report")

    def listed(self, items: Sequence[T], line: Callable[[T], str], *, limit: int, what: str) -> None:
        """:meth:`items` for items of one line each."""
        self.items(items, lambda item: [line(item)], limit=limit, what=what)

    def text(self, report: Path | None, report_bytes: int = 0) -> str:
        footer = "full report: not written"
        if report is not None:
            footer = f"full report (JSON, {report_bytes:,} bytes): {report}"
        budget = MAX_CHARS - len(footer) - _CUT_NOTE_CHARS
        kept: list[str] = []
        for i, line in enumerate(self.lines):
            budget -= len(line) + 1
            if budget < 0:
                rest = self.lines[i:]
                kept.append(
                    f"… summary cut here: {len(rest)} more line(s), {sum(len(x) + 1 for x in rest):,} "
                    "characters; everything is in the full report"
                )
                break
            kept.append(line)
        return "\n".join([*kept, footer])


# -- one function per tool: (document) -> Summary ------------------------------------------------------------


def _bullet(line: str) -> str:
    return f"- {short(line)}"


def _run(r: dict[str, Any]) -> str:
    steps = f"steps {step_text(r.get('first_step'))}–{step_text(r.get('last_step'))}"
    read = f"{r.get('format')}, {r.get('rows')} rows, {steps}, {len(r.get('events') or [])} event(s)"
    return f"- {r.get('name')} ({read}): {short(', '.join(r.get('metrics') or []), 160)}"


def _finding(f: dict[str, Any]) -> list[str]:
    where = f"{f.get('run')}/{f.get('metric')} step {step_text(f.get('step'))}"
    line = f"- {f.get('severity')} {f.get('kind')} {where}"
    lines = [f"{line}: {short(f.get('message'))}"]
    if f.get("suggestion"):
        lines.append(f"    → {short(f['suggestion'], 200)}")
    return lines


def triage(doc: dict[str, Any]) -> Summary:
    """What could not be read first, then the four answers in the order users ask them: what is broken where,
    what the logs show, what caused what, where to resume (the report's ``answers``)."""
    s = Summary()
    where = f" on {doc['target']}" if doc.get("target") else ""
    checkpoints = doc.get("units") or []
    summary = doc.get("summary") or {}
    s.add(
        f"triage of {doc.get('run_dir')}{where}: {doc.get('verdict')} (exit code {doc.get('exit_code')}) — "
        f"{summary.get('anomalies', 0)} anomaly(ies) in {len(doc.get('log_files') or [])} log file(s); "
        f"{len(checkpoints)} checkpoint(s): {counts_text(summary.get('units'))}"
    )
    problems = doc.get("problems") or []
    s.listed(problems, lambda p: f"NOT READ {p.get('path')}: {short(p.get('why'))}", limit=5, what="problems")
    answers = doc.get("answers") or {}
    broken = (answers.get("broken") or {}).get("lines") or []
    identity = [line for line in broken if line.startswith(_IDENTITY)]  # duplicates, step disagreements
    s.add(f"broken: {len(broken)} line(s):")
    main = [line for line in broken if line not in identity]
    s.listed(main, _bullet, limit=8, what="lines of what is broken")
    s.listed(identity, _bullet, limit=6, what="duplicates and step disagreements")
    shown = (answers.get("logs") or {}).get("lines") or []
    s.add(f"the logs show {len(shown)} line(s):")
    s.listed(shown, _bullet, limit=8, what="log findings")
    conclusions = doc.get("conclusions") or []
    s.add(f"causes: {len(conclusions)} conclusion(s), most likely first:")

    def conclusion(c: dict[str, Any]) -> list[str]:
        lines = [
            f"- step {step_text(c.get('step'))}: {short(c.get('title'))} ({c.get('confidence')} confidence)"
        ]
        evidence = c.get("evidence") or []
        lines += [f"    • {short(e)}" for e in evidence[:3]]
        if len(evidence) > 3:
            lines.append(f"    • … {len(evidence) - 3} more evidence line(s)")
        if c.get("suggestion"):
            lines.append(f"    → {short(c['suggestion'])}")
        return lines

    s.items(conclusions, conclusion, limit=5, what="conclusions")
    for line in (answers.get("resume") or {}).get("lines") or ["no checkpoint to resume from"]:
        s.add(short(line, 600))
    return s


def scan(doc: dict[str, Any]) -> Summary:
    s = Summary()
    t = doc.get("totals") or {}
    files = doc.get("files") or []
    s.add(
        f"scan: {doc.get('verdict')} (exit code {doc.get('exit_code')}) — {t.get('files', len(files))} "
        f"file(s), {t.get('tensors', 0)} tensors, {t.get('parameters', 0):,} parameters, "
        f"{t.get('bytes', 0):,} bytes; {t.get('nonfinite', 0)} non-finite value(s) in "
        f"{t.get('bad_tensors', 0)} tensor(s) (NaN {t.get('nan', 0)}, +Inf {t.get('posinf', 0)}, "
        f"-Inf {t.get('neginf', 0)}); {t.get('files_unreadable', 0)} unreadable"
    )

    def file(f: dict[str, Any]) -> list[str]:
        head = f"- {f.get('verdict')}: {f.get('path')} ({f.get('format') or 'unknown format'})"
        if f.get("error"):
            return [f"{head}: {short(f['error'])}"]
        lines = [head]
        lines += [f"    {short(n.get('message'))}" for n in (f.get("notes") or [])[:3]]
        lines += [f"    {short(p)}" for p in (f.get("problems") or [])[:3]]
        bad = [x for x in f.get("tensors") or [] if x.get("nan") or x.get("posinf") or x.get("neginf")]
        for x in bad[:5]:
            name = f"{x['name']} ({x['param_name']})" if x.get("param_name") else x.get("name")
            lines.append(
                f"    {name} {x.get('dtype')} {x.get('shape')}: NaN {x.get('nan')}, +Inf {x.get('posinf')}, "
                f"-Inf {x.get('neginf')}, first bad at {x.get('first_bad_index')}"
            )
        if len(bad) > 5:
            lines.append(f"    … {len(bad) - 5} more non-finite tensor(s) in this file")
        return lines

    # A unit is a file, or a directory of files; a path that names nothing is a unit without files.
    not_clean: list[dict[str, Any]] = []
    for unit in doc.get("units") or [{"files": [f.get("path") for f in files]}]:
        if unit.get("verdict", "clean") == "clean":
            continue
        mine = [f for f in files if f.get("path") in set(unit.get("files") or [])]
        if not mine or unit.get("problem"):
            why = unit.get("problem") or "looks like a checkpoint, but no reader claims it: not read"
            not_clean.append({"verdict": unit.get("verdict"), "path": unit.get("path"), "error": why})
        not_clean += [f for f in mine if f.get("verdict") != "clean"]
        not_clean += [
            {"verdict": e.get("indicates"), "path": unit.get("path"), "format": e.get("check"),
             "error": e.get("message")}
            for e in unit.get("evidence") or []
            if e.get("outcome") == "fail"
        ]  # fmt: skip
    s.items(not_clean, file, limit=10, what="files that are not clean")
    if files and not not_clean:
        listed = ", ".join(str(f.get("path")) for f in files[:5])
        s.add(f"every file clean: {listed}{' …' if len(files) > 5 else ''}")
    return s


def check(doc: dict[str, Any]) -> Summary:
    s = Summary()
    checkpoints = doc.get("units") or []
    s.add(
        f"check (exit code {doc.get('exit_code')}): {len(checkpoints)} checkpoint(s): "
        f"{counts_text(doc.get('summary'))}"
    )

    def one(c: dict[str, Any]) -> list[str]:
        step = step_text(c.get("step"))
        lines = [f"- {c.get('verdict')}: {c.get('path')} (step {step}): {short(c.get('reason'))}"]
        failed = [e for e in c.get("evidence") or [] if e.get("outcome") == "fail"]
        lines += [f"    FAIL {e.get('check')}: {short(e.get('message'), 200)}" for e in failed[:3]]
        if len(failed) > 3:
            lines.append(f"    … {len(failed) - 3} more failed check(s)")
        return lines

    from trainprobe.checkpoint.verdict import ORDER  # worst first: the library's one ranking

    def rank(c: dict[str, Any]) -> tuple[bool, int]:
        verdict = c.get("verdict")
        return not c.get("nonfinite"), ORDER.index(verdict) if verdict in ORDER else len(ORDER)

    ranked = sorted(checkpoints, key=rank)
    s.items(ranked, one, limit=10, what="checkpoints")
    return s


def diff(doc: dict[str, Any]) -> Summary:
    s = Summary()
    tensors = doc.get("tensors") or []
    s.add(f"diff (exit code {doc.get('exit_code')}): A {doc.get('a')} → B {doc.get('b')}")
    s.add(f"{len(tensors)} tensor(s): {counts_text(doc.get('summary'))}")
    steps = doc.get("optimizer_steps") or {}
    if steps.get("a") is not None or steps.get("b") is not None:
        s.add(f"optimizer step {step_text(steps.get('a'))} → {step_text(steps.get('b'))}")
    same = doc.get("same_run") or {}
    for key, what in (
        ("step_moved_weights_did_not", "optimizer stepped, weights identical"),
        ("weights_moved_step_did_not", "weights moved, optimizer step did not"),
    ):
        found = same.get(key) or []
        for line in found[:5]:
            s.add(f"- {what}: {short(line)}")
    if same.get("frozen_count"):
        listed = ", ".join(same.get("frozen_parameters") or [])
        s.add(f"{same['frozen_count']} parameter(s) did not move at all: {short(listed)}")
    changed = sorted(
        (
            t
            for t in tensors
            if t.get("status") == "changed" and isinstance(t.get("rel_change"), (int, float))
        ),
        key=lambda t: -float(t["rel_change"]),
    )
    if changed:
        s.add("largest relative changes (||A-B||/||A||):")
    s.listed(
        changed,
        lambda t: f"- {t.get('name')}: {t['rel_change']:.3g} (max |A-B| {t.get('max_abs_diff')})",
        limit=10,
        what="changed tensors",
    )
    other = [t for t in tensors if t.get("status") not in ("changed", "identical")]
    s.listed(
        other, lambda t: f"- {t.get('status')}: {t.get('name')}", limit=10, what="added/removed/reshaped"
    )
    return s


def logs(doc: dict[str, Any]) -> Summary:
    s = Summary()
    runs = doc.get("runs") or []
    findings = doc.get("findings") or []
    s.add(f"logs: {len(findings)} finding(s) ({counts_text(doc.get('summary'))}) in {len(runs)} run(s)")
    s.listed(runs, _run, limit=5, what="runs")
    if findings:
        s.add("findings, most severe first:")
    s.items(findings, _finding, limit=10, what="findings")
    return s


def watch_tail(doc: dict[str, Any]) -> Summary:
    s = Summary()
    tail = doc.get("tail") or {}
    findings = sorted(doc.get("findings") or [], key=lambda f: -_number(f.get("step")))
    since = tail.get("since_step")
    s.add(
        f"watch_tail {tail.get('path')}: last {tail.get('lines')} line(s), bytes "
        f"{tail.get('from_byte', 0):,}–{tail.get('file_bytes', 0):,} of {tail.get('file_bytes', 0):,}, "
        f"{tail.get('rows')} metric row(s); "
        f"{len(findings)} finding(s) ({counts_text(doc.get('summary'))})"
        + (
            f" after step {step_text(since)} ({tail.get('findings_before_since_step')} earlier left out)"
            if since is not None
            else ""
        )
    )
    for run in (doc.get("runs") or [])[:1]:
        metrics = short(", ".join(run.get("metrics") or []), 200)
        s.add(
            f"steps {step_text(run.get('first_step'))}–{step_text(run.get('last_step'))}; metrics: {metrics}"
        )
    if findings:
        s.add("latest first:")
    s.items(findings, _finding, limit=10, what="findings")
    return s


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) else float("-inf")
