"""The ``scan`` tool: NaN/Inf in checkpoints (``trainprobe.tasks.scan_on``; ``trainprobe.checkpoint.scan`` far
side)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import VersionedDocument
from trainprobe.mcp.parameters import Paths, Target, Timeout
from trainprobe.mcp.summary import Summary, short
from trainprobe.mcp.targets import LOCAL, on, place


class ScanDocument(VersionedDocument, total=False):
    """`trainprobe scan --json`: a verdict per unit and per file, each non-finite tensor counted."""

    options: dict[str, Any]
    totals: dict[str, Any]
    units: list[Any]
    files: list[Any]


def scan(
    paths: Paths,
    target: Target = LOCAL,
    stats: Annotated[
        bool, Field(description="Add min/max/mean/std/absmax/L2/zero fraction per tensor.")
    ] = False,
    verify: Annotated[bool, Field(description="Also check zip CRC32s and storage sizes.")] = False,
    timeout_s: Timeout = 1800,
) -> Annotated[CallToolResult, ScanDocument]:
    """Find NaN/+Inf/-Inf in checkpoints (weights and optimizer state) without torch and without executing
    anything from the files.

    Reads torch zip (.pt/.pth/.bin/.ckpt: plain, Lightning, DeepSpeed) and legacy files, safetensors, Hugging
    Face sharded checkpoints (*.index.json) and torch.distributed.checkpoint directories, detected by content.
    Per file: verdict (clean, nonfinite, suspicious pickle global, corrupt, unreadable) and each bad tensor's
    counts and first bad index."""
    return answer(
        TOOL,
        lambda: document(target, paths, stats=stats, verify=verify, timeout=timeout_s),
        target=target,
    )


def document(target: str, paths: list[str], *, stats: bool, verify: bool, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import scan_on

    return on(place(target, "scan"), scan_on, paths, stats=stats, verify=verify, timeout=timeout).to_json()


def summarise(doc: dict[str, Any]) -> Summary:
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


TOOL = Tool(scan, summarise, brief="NaN/Inf")
