"""Sizes and counts as people read them in a report line: ``1.2 GB``, ``7.3M``."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """``n`` bytes in decimal units (kB = 1000 B, as file managers and ``ls --si`` show them)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def short_count(n: int) -> str:
    """A count of parameters or tensors: ``7.3M``, ``512``."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)
