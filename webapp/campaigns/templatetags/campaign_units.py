"""Template filters for sizes: {{ run.read_size|size }} -> "4 KiB"."""

from __future__ import annotations

from collections.abc import Iterable

from django import template

from workers.engine.units import format_size

register = template.Library()


@register.filter
def size(n_bytes: int | float | None) -> str:
    return "" if n_bytes is None else format_size(n_bytes)


@register.filter
def sizes(values: Iterable[int]) -> str:
    return ", ".join(format_size(v) for v in values)


@register.filter
def join_values(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)
