"""Byte sizes as people write them on a command line: 4k, 1M, 1GiB, 4096."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_MULTIPLIER = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SHORT_UNITS = (("G", 1024**3), ("M", 1024**2), ("k", 1024))


def parse_size(text: str | int) -> int:
    """Parse a size with binary multipliers (4k = 4096 bytes); raise ValueError if malformed."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 4096, 4k, 1M, 1G)")
    number, unit, _ = match.groups()
    return int(number) * _MULTIPLIER[unit.lower()]


def size_text(n_bytes: int) -> str:
    """The shortest exact text parse_size reads back: 4096 -> '4k', 16 MiB -> '16M',
    1000 -> '1000'. For command lines, form fields and file names (file-16M)."""
    for unit, multiple in _SHORT_UNITS:
        if n_bytes and n_bytes % multiple == 0:
            return f"{n_bytes // multiple}{unit}"
    return str(n_bytes)


def format_size(n_bytes: float) -> str:
    """4096 -> '4 KiB', 1536 -> '1.5 KiB': for tables and messages."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n_bytes) < 1024 or unit == "GiB":
            text = f"{n_bytes:.1f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
        n_bytes /= 1024
    raise AssertionError("unreachable")
