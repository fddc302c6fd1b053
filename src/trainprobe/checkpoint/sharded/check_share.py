"""``check`` of a unit whose files are on several machines (``check --on FLEET --sharded PATH``): what runs
where the files are (:func:`check_share`), and one part's checks read in shares made one
(:func:`merge_part_shares`). The plan (who reads what) is :mod:`trainprobe.checkpoint.sharded.plan`'s; the
unit's verdict :func:`~trainprobe.checkpoint.check.unit.judge_check`'s, as for a check in one place.

**What is exact and what is not.** A part read whole by one target (a DeepSpeed partition or model states
file, an HF ``optimizer.pt`` or safetensors shard, a Lightning ``.ckpt``, and a DCP directory or HF index
whose data files one target holds all of) is checked there exactly as ``check`` checks it here, and the unit
is judged from those checks by the same function: verdict and evidence are those of a check of all the files
in one place. A multi-file part whose data files no single target holds (a DCP checkpoint on node-local
disks) is read in shares; what the shares say merges exactly where a check concerns one data file at a time
— NaN/Inf, zip CRC32s and record sizes, DCP chunk coverage (from ``.metadata`` and the sizes every holder
listed), missing data files, the index, the step counters as identity facts — but not where it relates
tensors and objects stored in different data files: a DCP rank's file holds some of the ``param_groups``,
some step counters, its own chunks of ``exp_avg`` and ``exp_avg_sq``. Those checks (param_groups, state
shapes, the optimizer families' evidence including Adam's pairs, master weights, optimizer state against
the model's weights) are reported as not made (``sharded``, skipped and ambiguous: the verdict is at best
unknown), never guessed. Per-parameter step counters that disagree across the shares still show (torn).

Stdlib + numpy only (shipped to remote hosts).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.part import (
    PartCheck,
    check_part,
    integrity_evidence,
    nonfinite_evidence,
)
from trainprobe.checkpoint.check.structure import disagreeing_counters
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.base import Note
from trainprobe.checkpoint.units.facts import PartFacts
from trainprobe.checkpoint.units.frameworks import Part

_WORKERS = min(8, (os.cpu_count() or 2) + 2)
# Evidence about one data file at a time, which a part's shares say exactly: kept (and merged).
_PER_FILE = ("hf-index", "container", "non-finite")
#: The checks a part read in shares cannot make (they relate tensors of different data files).
NOT_SPLIT = (
    "param_groups, state shapes, the optimizer families' evidence (Adam's exp_avg/exp_avg_sq pairs), master "
    "weights and optimizer state against the model's weights"
)


def check_share(path: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """Check the parts of ``requests`` (from the plan) here: one
    :class:`~trainprobe.checkpoint.check.part.PartCheck` per request, in order (JSON), and how long it took;
    progress on stderr as :func:`~.scan_share.scan_share` gives it."""
    from trainprobe.checkpoint.check.run import dcp_evidence
    from trainprobe.checkpoint.sharded.scan_share import parse_share
    from trainprobe.checkpoint.units.open import framework_of, open_part

    started = time.perf_counter()
    parsed, sizes, counts, progress = parse_share(requests)
    checks = []
    with ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="trainprobe-check") as pool:
        for request, size, count in zip(parsed, sizes, counts, strict=True):
            progress.start(size)
            part = request.part
            ckpt, error, error_verdict, notes = open_part(
                part.path, files=request.files, description=request.description
            )
            pc = PartCheck(part.path, part.role, error=error, error_verdict=error_verdict, notes=notes)
            if request.description is None:  # read whole here: its coverage too (else the plan's)
                pc.coverage = dcp_evidence(part.path)
            if ckpt is not None:
                try:
                    pc.notes.extend(ckpt.notes)
                    check_part(ckpt, pc, framework_of(request.framework, ckpt), pool)
                finally:
                    ckpt.close()
            checks.append(pc.to_json())
            progress.finish(count)
    return {"checks": checks, "seconds": time.perf_counter() - started}


def merge_part_shares(
    part: Part, shares: Sequence[PartCheck], errors: Sequence[tuple[str, str]], *, split: str = ""
) -> PartCheck:
    """One part's checks from its shares' (in the order of their data files), with ``errors`` ((error,
    verdict): data files nobody holds, or whose target failed). ``split``: where the shares were read, when
    more than one target read them (the checks that relate their data files are then reported as not made);
    "" when one share is the whole part."""
    found = [(s.error, s.error_verdict) for s in shares if s.error is not None] + list(errors)
    if not split:
        merged = dataclasses.replace(shares[0]) if shares else PartCheck(part.path, part.role)
    else:
        merged = PartCheck(part.path, part.role)
        merged.notes = sorted(dict.fromkeys(n for s in shares for n in s.notes), key=_note_order)
    if found:
        merged.error = "; ".join(e for e, _v in found)
        merged.error_verdict = V.worst(v for _e, v in found)
    if not split:
        return merged
    opened = [s for s in shares if s.opened]
    merged.opened = bool(opened)
    merged.format = next((s.format for s in opened if s.format), None)
    merged.metadata_notes = [n for s in opened for n in s.metadata_notes]
    # In the order of their data files, as one read of them all lists its tensors.
    rows = sorted(
        (row for s in opened for row in zip(s.nonfinite_files, s.nonfinite, strict=True)), key=lambda r: r[0]
    )
    merged.nonfinite = [entry for _f, entry in rows]
    merged.nonfinite_files = [f for f, _e in rows]
    merged.fingerprints = [fp for s in opened for fp in s.fingerprints]
    merged.tensors = sum(s.tensors for s in opened)
    merged.bytes = sum(s.bytes for s in opened)
    facts: PartFacts | None = None
    for s in opened:
        if s.facts is not None:
            facts = s.facts if facts is None else facts.merge(s.facts)
    merged.facts = facts
    merged.cover = {
        "path": part.path,
        "role": part.role,
        "weights": [w for s in opened if s.cover for w in s.cover["weights"]],
        "optimizers": [],  # state against weights: one of the relations a share cannot judge
    }
    merged.evidence = _per_file_evidence(opened, merged.nonfinite)
    for label, counters in (facts.counters if facts is not None else {}).items():
        if len(counters) > 1:
            merged.evidence.append(disagreeing_counters(label, counters, None))
    # Whether the part holds optimizer state is itself one of the relations: a rank file without the
    # param_groups shows no optimizer. Said by the skip below, not guessed per share.
    merged.presence, merged.presence_at = "", len(merged.evidence)
    merged.evidence.append(
        Evidence(
            "sharded",
            "skip",
            f"read in shares ({split}): {NOT_SPLIT} relate tensors of different data files and were not "
            "checked — check it where one machine sees all its data files (copy them together, or shared "
            "storage) for the full check",
            values={"ambiguous": True},
        )
    )
    return merged


def _note_order(n: Note) -> tuple[str, str]:
    return n.kind, n.message


def _per_file_evidence(shares: Sequence[PartCheck], nonfinite: list[dict[str, Any]]) -> list[Evidence]:
    """The evidence of the shares that concerns one data file at a time, as one check of them all says it
    (``nonfinite``: the shares' NaN/Inf entries in the order of their data files)."""
    every = [e for s in shares for e in s.evidence if e.check in _PER_FILE]
    out = [e for e in every if e.check == "hf-index"][:1]
    integrity = [e for e in every if e.check == "container" and "problems" in e.values]
    if integrity or any(e.check == "container" and e.outcome == "pass" for e in every):
        problems = [p for e in integrity for p in e.values["problems"]]
        out.append(integrity_evidence(problems, sum(int(e.values["count"]) for e in integrity)))
    if nonfinite:
        out.append(nonfinite_evidence(nonfinite))
    # A share that could not be checked on (a data file damaged inside) says so in its own words.
    out.extend(e for e in every if e.check == "container" and e.failed and "problems" not in e.values)
    return out
