"""Names that are not Unicode, carried in JSON as I-JSON (RFC 7493): escaped text plus the raw bytes.

A file name with a byte that is not UTF-8 comes to Python as a lone surrogate (``os.fsdecode``'s
surrogateescape), and so may a tensor name or a key a hostile header spells with ``\\udcff``. Such a string
is not Unicode: strict JSON readers refuse it and the name cannot be recovered from it. :func:`i_json` makes
a JSON-ready document safe: every string holding a lone surrogate becomes its bytes' text with each bad byte
written ``\\xNN`` (``"a\\xff.pt"``), and beside its key goes ``<key>_bytes_b64``, the base64 of the raw bytes
(for a list: a list, ``null`` where the item was valid). A dict key that is not Unicode is escaped the same
way and its bytes listed under ``_keys_bytes_b64`` (escaped key -> base64). Documented in docs/names.md.
Stdlib only.
"""

from __future__ import annotations

import base64
from typing import Any

SUFFIX = "_bytes_b64"


def raw_bytes(text: str) -> bytes:
    """The bytes a (possibly surrogate-holding) string stands for: surrogateescape's, else UTF-8's with the
    surrogates themselves encoded (``surrogatepass``)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escaped(text: str) -> str:
    """``text`` as valid Unicode: bytes that are not UTF-8 written ``\\xNN``."""
    return text if is_unicode(text) else raw_bytes(text).decode("utf-8", "backslashreplace")


def b64(text: str) -> str:
    return base64.b64encode(raw_bytes(text)).decode("ascii")


def i_json(doc: Any) -> Any:
    """A copy of the JSON-ready ``doc`` in which every non-Unicode string is escaped, its bytes beside it."""
    if isinstance(doc, str):
        return escaped(doc)
    if isinstance(doc, list | tuple):
        return [i_json(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out: dict[Any, Any] = {}
    bad_keys: dict[str, str] = {}
    for key, value in doc.items():
        name = key
        if isinstance(key, str) and not is_unicode(key):
            name = escaped(key)
            bad_keys[name] = b64(key)
        out[name] = i_json(value)
        if isinstance(value, str) and not is_unicode(value):
            out[f"{name}{SUFFIX}"] = b64(value)
        elif isinstance(value, list | tuple) and any(isinstance(v, str) and not is_unicode(v) for v in value):
            out[f"{name}{SUFFIX}"] = [
                b64(v) if isinstance(v, str) and not is_unicode(v) else None for v in value
            ]
    if bad_keys:
        out["_keys" + SUFFIX] = bad_keys
    return out
