"""What leaves the server is safe to send and inert to show.

- :func:`sendable`: the one pass every tool result's document goes through before it is kept or sent. Every
  string (dict keys too) loses its lone surrogates, written as :func:`trainprobe.visible.visible` writes
  them (``\\udcff``, the stand-in ``os.fsdecode`` puts for the byte 0xff of a file name that is not UTF-8,
  becomes the four characters ``\\xff``); NaN and ±Inf become null; tuples become lists. The SDK's writer
  cannot encode a lone surrogate, and before this one such file name stopped the server.
- :func:`shown`: the same document with every string made inert (:func:`~trainprobe.visible.visible`:
  control characters, bidi controls, newlines written as visible escapes), for the summaries an agent's UI
  displays; the structured content keeps the data as it is.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trainprobe.visible import visible

_SURROGATE = re.compile("[\ud800-\udfff]")


def sendable_text(text: str) -> str:
    """``text`` with each lone surrogate written as a visible escape (nothing else changed)."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: visible(m.group()), text)


def sendable(value: Any) -> Any:
    """``value`` as strict, UTF-8-encodable JSON data (see the module's docstring); other objects become
    their ``str()``."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return sendable_text(value)
    if isinstance(value, dict):
        return {_key(k, sendable_text): sendable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sendable(v) for v in value]
    return sendable_text(str(value))


def shown(value: Any) -> Any:
    """``value`` (a :func:`sendable` document) with every string, keys too, made inert for display."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {_key(k, visible): shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value


def _key(key: Any, clean: Any) -> str:
    return str(clean(key if isinstance(key, str) else str(key)))
