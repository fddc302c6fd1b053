"""Which lines of a chunk the learnt templates read in bulk (:mod:`.template`), and which are left for the
tokenizer: a line goes to the first template whose anchor it holds, read in batches that halve around lines
that do not fit. Pure: :mod:`.parser` adds the blocks to its columns in line order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from trainprobe.metrics.readers.text.template import Template

#: fewer lines than this are read one by one (a block's set-up costs more than it saves)
_MIN_BULK = 8
_MAY_ANNOUNCE_EVAL = re.compile(rb"(?i)\b(?:eval|valid|test)")


@dataclass
class Block:
    """Lines (indices into the chunk) one template read, and what it read: (values, walls)."""

    template: Template
    lines: list[int]
    got: tuple[np.ndarray, np.ndarray | None]


def split_lines(templates: list[Template], lines: list[bytes]) -> tuple[list[int], list[Block]]:
    """(indices of the lines left for the tokenizer, in order; the blocks the templates read)."""
    owner = [-1] * len(lines)
    for t, template in enumerate(templates):
        anchor = template.anchor
        for i, line in enumerate(lines):
            if owner[i] < 0 and anchor in line:
                owner[i] = t
    for i in range(1, len(lines)):
        # right under a line that may announce an evaluation: read it one by one, with that context
        if owner[i] >= 0 and owner[i - 1] < 0 and _MAY_ANNOUNCE_EVAL.search(lines[i - 1]):
            owner[i] = -1
    rest: list[int] = []
    blocks: list[Block] = []
    for t, template in enumerate(templates):
        idx = [i for i, o in enumerate(owner) if o == t]
        if idx:
            rest.extend(_read_in_bulk(template, lines, idx, blocks))
    rest.extend(i for i, o in enumerate(owner) if o < 0)
    rest.sort()
    return rest, blocks


def _read_in_bulk(template: Template, lines: list[bytes], idx: list[int], out: list[Block]) -> list[int]:
    """Read the lines ``idx`` with ``template``, halving the batch around lines that do not fit; returns
    the lines left for the tokenizer."""
    if len(idx) < _MIN_BULK:
        return idx
    got = template.read_block(b"\n".join(lines[i] for i in idx), len(idx))
    if got is not None:
        out.append(Block(template, idx, got))
        return []
    half = len(idx) // 2
    return _read_in_bulk(template, lines, idx[:half], out) + _read_in_bulk(template, lines, idx[half:], out)


__all__ = ["Block", "split_lines"]
