"""Text from the data made inert before a person or an agent's UI sees it; stdlib only.

A tensor name, a state-dict key, a JSONL key, a TensorBoard tag, a run name or a file name is data written
by someone else. Shown raw, its control characters act on the terminal: ESC starts a sequence that sets the
window title, writes the clipboard (OSC 52) or erases the line above (a ``✗ NON-FINITE`` line replaced by
``✓ clean``); a newline in a file name prints a line that looks like a verdict; a bidi override makes
``exe.pt`` read as ``tp.exe``. :func:`visible` is the one quoting function at the edge (as git's
``core.quotePath`` and GNU ``ls --quoting-style=escape`` do it): every such character is written as a visible
escape, so the text shows what is there and can do nothing else.

What is escaped and how::

    \\t \\n \\r                         as those two characters
    other C0 (U+0000-U+001F), DEL, C1   \\xNN (\\x1b for ESC, \\x07 for BEL, \\x9b for CSI)
    bidi controls, line/paragraph sep   \\uXXXX (U+061C, U+200E-U+200F, U+2028-U+202E, U+2066-U+2069)
    a lone surrogate U+DC80-U+DCFF      \\xNN: the byte it stands for (a file name that is not UTF-8)
    any other lone surrogate            \\uXXXX
    a backslash                         kept as it is (only the characters above are changed)

Our own styling (ANSI sequences the CLI adds after this step) is never passed through it.
"""

from __future__ import annotations

import re

__all__ = ["visible", "visible_lines", "visible_surrogates"]

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

#: every character :func:`visible` escapes
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(character: str) -> str:
    named = _NAMED.get(character)
    if named is not None:
        return named
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with each control, bidi and lone-surrogate character escaped visibly (see the module's table);
    the characters in ``keep`` (e.g. ``"\\n"`` for a text of several lines) are left as they are."""
    if not _UNSAFE.search(text):
        return text
    if not keep:
        return _UNSAFE.sub(lambda m: _escape(m.group()), text)
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def visible_lines(text: str) -> str:
    """``text`` of several lines made inert, its newlines kept (a rendered report, a summary)."""
    return visible(text, keep="\n")


_SURROGATE = re.compile("[\ud800-\udfff]")


def visible_surrogates(text: str) -> str:
    """``text`` with only its lone surrogates escaped (``\\xNN`` for a byte a file name held that was not
    UTF-8): what JSON needs to be I-JSON, where every other character is fine as it is."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: _escape(m.group()), text)
