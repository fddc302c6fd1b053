"""Short text summaries of the tools' JSON documents, sized for a model's context.

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
RUN_OUTPUT_CHARS = 3000  # of the script's stdout shown by `run`; stderr gets half
_IDENTITY = ("byte-identical copies: ", "the same tensors (not the same bytes): ", "step disagreement: ")


def _short(text: Any, limit: int = MAX_LINE) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _step(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return "?" if x is None else str(x)


def _counts(counts: dict[str, Any] | None) -> str:
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


def _finding(f: dict[str, Any]) -> list[str]:
    line = (
        f"- {f.get('severity')} {f.get('kind')} {f.get('run')}/{f.get('metric')} step {_step(f.get('step'))}"
    )
    lines = [f"{line}: {_short(f.get('message'))}"]
    if f.get("suggestion"):
        lines.append(f"    → {_short(f['suggestion'], 200)}")
    return lines


def triage(doc: dict[str, Any]) -> Summary:
    """What could not be read first, then the four answers in the order users ask them: what is broken where,
    what the logs show, what caused what, where to resume (the report's ``answers``)."""
    s = Summary()
    where = f" on {doc['target']}" if doc.get("target") else ""
    checkpoints = doc.get("checkpoints") or []
    summary = doc.get("summary") or {}
    s.add(
        f"triage of {doc.get('run_dir')}{where}: {doc.get('verdict')} (exit code {doc.get('exit_code')}) — "
        f"{summary.get('anomalies', 0)} anomaly(ies) in {len(doc.get('log_files') or [])} log file(s); "
        f"{len(checkpoints)} checkpoint(s): {_counts(summary.get('checkpoints'))}"
    )
    problems = doc.get("problems") or []
    s.items(
        problems, lambda p: [f"NOT READ {p.get('path')}: {_short(p.get('why'))}"], limit=5, what="problems"
    )
    answers = doc.get("answers") or {}
    broken = (answers.get("broken") or {}).get("lines") or []
    identity = [line for line in broken if line.startswith(_IDENTITY)]  # duplicates, step disagreements
    s.add(f"broken: {len(broken)} line(s):")
    main = [line for line in broken if line not in identity]
    s.items(main, lambda line: [f"- {_short(line)}"], limit=8, what="lines of what is broken")
    s.items(identity, lambda line: [f"- {_short(line)}"], limit=6, what="duplicates and step disagreements")
    shown = (answers.get("logs") or {}).get("lines") or []
    s.add(f"the logs show {len(shown)} line(s):")
    s.items(shown, lambda line: [f"- {_short(line)}"], limit=8, what="log findings")
    conclusions = doc.get("conclusions") or []
    s.add(f"causes: {len(conclusions)} conclusion(s), most likely first:")

    def conclusion(c: dict[str, Any]) -> list[str]:
        lines = [
            f"- step {_step(c.get('step'))}: {_short(c.get('title'))} ({c.get('confidence')} confidence)"
        ]
        evidence = c.get("evidence") or []
        lines += [f"    • {_short(e)}" for e in evidence[:3]]
        if len(evidence) > 3:
            lines.append(f"    • … {len(evidence) - 3} more evidence line(s)")
        if c.get("suggestion"):
            lines.append(f"    → {_short(c['suggestion'])}")
        return lines

    s.items(conclusions, conclusion, limit=5, what="conclusions")
    for line in (answers.get("resume") or {}).get("lines") or ["no checkpoint to resume from"]:
        s.add(_short(line, 600))
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
            return [f"{head}: {_short(f['error'])}"]
        lines = [head]
        lines += [f"    {_short(n.get('message'))}" for n in (f.get("notes") or [])[:3]]
        lines += [f"    {_short(p)}" for p in (f.get("problems") or [])[:3]]
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
    checkpoints = doc.get("checkpoints") or []
    s.add(
        f"check (exit code {doc.get('exit_code')}): {len(checkpoints)} checkpoint(s): "
        f"{_counts(doc.get('summary'))}"
    )

    def one(c: dict[str, Any]) -> list[str]:
        lines = [
            f"- {c.get('verdict')}: {c.get('path')} (step {_step(c.get('step'))}): {_short(c.get('reason'))}"
        ]
        failed = [e for e in c.get("evidence") or [] if e.get("outcome") == "fail"]
        lines += [f"    FAIL {e.get('check')}: {_short(e.get('message'), 200)}" for e in failed[:3]]
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
    s.add(f"{len(tensors)} tensor(s): {_counts(doc.get('summary'))}")
    steps = doc.get("optimizer_steps") or {}
    if steps.get("a") is not None or steps.get("b") is not None:
        s.add(f"optimizer step {_step(steps.get('a'))} → {_step(steps.get('b'))}")
    same = doc.get("same_run") or {}
    for key, what in (
        ("step_moved_weights_did_not", "optimizer stepped, weights identical"),
        ("weights_moved_step_did_not", "weights moved, optimizer step did not"),
    ):
        found = same.get(key) or []
        for line in found[:5]:
            s.add(f"- {what}: {_short(line)}")
    if same.get("frozen_count"):
        listed = ", ".join(same.get("frozen_parameters") or [])
        s.add(f"{same['frozen_count']} parameter(s) did not move at all: {_short(listed)}")
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
    s.items(
        changed,
        lambda t: [f"- {t.get('name')}: {t['rel_change']:.3g} (max |A-B| {t.get('max_abs_diff')})"],
        limit=10,
        what="changed tensors",
    )
    other = [t for t in tensors if t.get("status") not in ("changed", "identical")]
    s.items(
        other, lambda t: [f"- {t.get('status')}: {t.get('name')}"], limit=10, what="added/removed/reshaped"
    )
    return s


def logs(doc: dict[str, Any]) -> Summary:
    s = Summary()
    runs = doc.get("runs") or []
    findings = doc.get("findings") or []
    s.add(f"logs: {len(findings)} finding(s) ({_counts(doc.get('summary'))}) in {len(runs)} run(s)")
    s.items(
        runs,
        lambda r: [
            f"- {r.get('name')} ({r.get('format')}, {r.get('rows')} rows, steps {_step(r.get('first_step'))}–"
            f"{_step(r.get('last_step'))}, {len(r.get('events') or [])} event(s)): "
            f"{_short(', '.join(r.get('metrics') or []), 160)}"
        ],
        limit=5,
        what="runs",
    )
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
        f"{len(findings)} finding(s) ({_counts(doc.get('summary'))})"
        + (
            f" after step {_step(since)} ({tail.get('findings_before_since_step')} earlier left out)"
            if since is not None
            else ""
        )
    )
    for run in (doc.get("runs") or [])[:1]:
        metrics = _short(", ".join(run.get("metrics") or []), 200)
        s.add(f"steps {_step(run.get('first_step'))}–{_step(run.get('last_step'))}; metrics: {metrics}")
    if findings:
        s.add("latest first:")
    s.items(findings, _finding, limit=10, what="findings")
    return s


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) else float("-inf")


def probe(doc: dict[str, Any]) -> Summary:
    if "targets" in doc:
        return fleet(doc, "probe")
    s = Summary()
    memory = doc.get("memory") or {}
    gib = 2**30
    s.add(
        f"probe {doc.get('target')}: host {doc.get('host')}, user {doc.get('user')}, {doc.get('cpus')} "
        f"CPU(s), load {' '.join(str(x) for x in doc.get('load') or [])}, memory "
        f"{memory.get('memavailable_bytes', 0) / gib:.1f} GiB free of "
        f"{memory.get('memtotal_bytes', 0) / gib:.1f} GiB"
    )
    interpreters = doc.get("interpreters") or []
    s.add(f"{len(interpreters)} Python interpreter(s), in discovery order:")
    s.items(
        interpreters,
        lambda i: [
            f"- {i.get('python')} {i.get('version') or i.get('error')}: numpy {i.get('numpy') or '—'}, torch "
            f"{i.get('torch') or '—'}"
            + (f", cuda {i.get('cuda')} ({i.get('cuda_devices')})" if "cuda" in i else "")
        ],
        limit=10,
        what="interpreters",
    )
    gpus = doc.get("gpus")
    if gpus is None:
        s.add("GPUs: no nvidia-smi")
    else:
        s.items(
            gpus,
            lambda g: [
                f"- GPU {g.get('index')} {g.get('name')}: {g.get('memory_used_mib')}/"
                f"{g.get('memory_total_mib')} MiB, {g.get('utilization_pct')} % busy"
            ],
            limit=16,
            what="GPUs",
        )
    s.items(
        doc.get("disks") or [],
        lambda d: [
            f"- disk {d.get('path')}: {d.get('free_bytes', 0) / gib:.1f} GiB free of "
            f"{d.get('total_bytes', 0) / gib:.1f} GiB"
        ],
        limit=5,
        what="disks",
    )
    processes = sorted(doc.get("processes") or [], key=lambda p: not p.get("training"))
    s.add(f"{len(processes)} running Python process(es)" + (":" if processes else ""))
    s.items(
        processes,
        lambda p: [
            f"- pid {p.get('pid')}{' TRAINING' if p.get('training') else ''}: {_short(p.get('cmdline'), 200)}"
        ],
        limit=10,
        what="processes",
    )
    return s


def fleet(doc: dict[str, Any], tool: str) -> Summary:
    s = Summary()
    counts = dict(doc.get("counts") or {})
    total = counts.pop("total", len(doc.get("targets") or []))
    s.add(
        f"{tool} on {total} target(s): {_counts(counts)} (exit code {doc.get('exit_code')}); logs: "
        f"{doc.get('log_dir')}"
    )
    s.items(
        doc.get("targets") or [],
        lambda o: [
            f"- {o.get('target')}: {o.get('status')}, exit {o.get('exit_code')}: "
            f"{_short(o.get('summary'), 200)}"
        ],
        limit=20,
        what="targets",
    )
    return s


def run(doc: dict[str, Any]) -> Summary:
    if "targets" in doc:
        return fleet(doc, "run")
    s = Summary()
    s.add(
        f"run on {doc.get('target')}: exit code {doc.get('exit_code')} in {doc.get('duration')} s, python "
        f"{doc.get('python')} on {doc.get('host')}"
    )
    if doc.get("result") is not None:
        import json

        shown = json.dumps(doc["result"], default=str)
        cut = f" … ({len(shown) - 1000:,} more characters in the full report)" if len(shown) > 1000 else ""
        s.add(f"main() returned: {shown[:1000]}{cut}")
    for stream, limit in (("stdout", RUN_OUTPUT_CHARS), ("stderr", RUN_OUTPUT_CHARS // 2)):
        s.lines.extend(_output_tail(stream, doc.get(f"{stream}_log"), limit))
    return s


def _output_tail(stream: str, path: str | None, limit: int) -> list[str]:
    """The end of a run's stdout or stderr, saying how many bytes before it were left out and where."""
    if not path:
        return []
    try:
        data = Path(path).read_bytes()
    except OSError:
        return [f"{stream}: not kept ({path} cannot be read)"]
    if not data:
        return [f"{stream}: (empty)"]
    shown = data[-limit:]
    if len(shown) < len(data):
        cut = shown.find(b"\n")
        shown = shown[cut + 1 :] if 0 <= cut < len(shown) - 1 else shown
    head = f"{stream} ({len(data):,} bytes"
    head += (
        f"; the first {len(data) - len(shown):,} left out, all of it in {path})"
        if len(shown) < len(data)
        else ")"
    )
    return [head + ":", shown.decode("utf-8", "replace").rstrip("\n")]
