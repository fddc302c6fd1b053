"""Evidence between the units of one check: tensors one unit shares, bit for bit, with another whose step is
earlier — from the per-tensor fingerprints the NaN pass already computed (no extra read).

- ``moments-unchanged`` (corrupt): optimizer moments (Adam's ``exp_avg``/``exp_avg_sq``, a momentum buffer,
  ...) identical to an earlier unit's while the unit records a step at least two later. A moment changes at
  every optimizer step that counts it (it decays even on a zero gradient, unless it is zero), so this is an
  earlier state under a later step: a stale save relabelled, or state copied from another unit. Moments that
  are all zeros are left out (a parameter stepped on zero gradients keeps them).
- ``frozen-tensors`` (note): tensors identical to an earlier unit's, none of them a moment that should have
  moved: frozen layers, or parameters the optimizer does not update.

Steps are what the units record (a step field, trainer_state.json, the optimizer's counters): a step read from
a name is a label and decides nothing here. Wholly identical units are :func:`..fingerprint.mark_identical`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.report import CheckResult, decide
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.zipcheck import default_crc32

_MOMENT = re.compile(r"(?:^|[.:])(exp_avg|exp_avg_sq|max_exp_avg_sq|exp_inf|momentum_buffer|square_avg)$")
_LABELS = ("name", "directory", "nothing")
_FINGERPRINT = re.compile(r"^crc32:([0-9a-f]{8}):(\d+)$")


@lru_cache(maxsize=256)
def _zero_crc(size: int) -> int:
    """The CRC32 of ``size`` zero bytes, as the fingerprints compute it (computed once per size)."""
    crc, block = 0, memoryview(bytes(min(size, 1 << 20)))
    for start in range(0, size, len(block) or 1):
        crc = default_crc32(block[: min(len(block), size - start)], crc)
    return crc


def _is_zeros(fp: str) -> bool:
    """Whether a fingerprint is that of all-zero bytes (a whole, contiguous tensor's); False when unsure."""
    m = _FINGERPRINT.match(fp)
    return m is not None and int(m.group(1), 16) == _zero_crc(int(m.group(2)))


def cross_unit_evidence(results: Sequence[CheckResult]) -> None:
    """Add the evidence of the module doc to each unit that shares tensors with an earlier one (the earlier
    unit sharing the most), and decide its verdict again."""
    recorded = [
        (r.step, r, {(k, fp) for k, fp in r.tensor_prints.items() if fp is not None})
        for r in results
        if r.step is not None and r.step_source not in _LABELS and r.tensor_prints
    ]
    for step, later, mine in recorded:
        best: tuple[int, CheckResult, set[tuple[str, str]]] | None = None
        for other_step, earlier, theirs in recorded:
            if earlier is later or earlier.path in later.identical_to or step - other_step < 2:
                continue
            shared = mine & theirs  # one set intersection per pair, not a lookup per tensor
            if shared and (best is None or len(shared) > best[0]):
                best = (len(shared), earlier, shared)
        if best is not None:
            _add(later, best[1], sorted(k for k, _fp in best[2]))


def _add(later: CheckResult, earlier: CheckResult, shared: list[str]) -> None:
    moments = [k for k in shared if _MOMENT.search(k) and not _is_zeros(later.tensor_prints[k] or "")]
    total = len(later.tensor_prints)
    where = f"{earlier.path}'s (step {earlier.step})"
    values = {
        "other": earlier.path,
        "other_step": earlier.step,
        "shared": len(shared),
        "tensors": total,
        "moments_held": sum(1 for k in later.tensor_prints if _MOMENT.search(k)),
    }
    if moments:
        named = ", ".join(k.split(":", 1)[-1] for k in moments[:3]) + (" ..." if len(moments) > 3 else "")
        later.evidence.append(
            Evidence(
                "moments-unchanged",
                "fail",
                f"{len(moments)} optimizer moment(s) ({named}) are bit-identical to {where} while this "
                f"unit's step is {later.step}: a moment changes at every optimizer step, so this is an "
                "earlier state under a later step (a stale save relabelled, or state copied from another "
                f"unit); {len(shared)} of its {total} tensors are identical to that unit's",
                indicates=V.CORRUPT,
                values={**values, "moments": moments[:50], "moments_shared": len(moments)},
            )
        )
        decide(later)
        return
    later.evidence.append(
        Evidence(
            "frozen-tensors",
            "note",
            f"{len(shared)} of its {total} tensors are identical to {where}, none of them an optimizer "
            "moment that should have moved: frozen layers, or parameters the optimizer does not update",
            values=values,
        )
    )
