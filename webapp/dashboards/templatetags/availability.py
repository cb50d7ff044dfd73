"""Template filters of the site summary: {{ cell.availability|availability }} -> "97%"."""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def availability(share: float | None) -> str:
    """A share of successful runs as a whole percentage, rounded down, so that 100% means
    every run succeeded; None (no runs) is "—"."""
    if share is None:
        return "—"
    return f"{math.floor(share * 100 + 1e-9):.0f}%"


@register.filter
def failure_rate(rate: float | None) -> str:
    """A failure rate as a percentage with one decimal: 0.0125 -> "1.3%"; None is "—"."""
    return "—" if rate is None else f"{rate * 100:.1f}%"


@register.filter
def cells_of(endpoint: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """An endpoint summary's cells of one strip: "days" or "weeks"."""
    return list(endpoint[key]) if key in ("days", "weeks") else []


@register.filter
def percent(share: float | None) -> str:
    """A share with one decimal: 0.9876 -> "98.7%" (rounded down); None is "—"."""
    if share is None:
        return "—"
    return f"{math.floor(share * 1000 + 1e-9) / 10:.1f}%"


@register.filter
def terms_words(terms: Any) -> str:
    """A month's A/R terms in words (a cell's title)."""
    names = ("total", "up", "down", "unknown", "scheduled_downtime", "unscheduled_downtime")
    return ", ".join(f"{name.replace('_', ' ')} {getattr(terms, name):g}" for name in names)
