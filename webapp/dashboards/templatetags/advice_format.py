"""Template filters for the advice: a statement's value and interval in its unit
({{ statement.value|advice_value:statement.unit }} -> "0.8%") and a verdict in words
("copy first")."""

from __future__ import annotations

from django import template

from webapp.advice.statements import TOO_THIN
from webapp.core.units import format_duration_s, format_rate, format_size

register = template.Library()

MISSING = "—"


@register.filter
def advice_value(value: float | None, unit: str) -> str:
    """A fraction as a percentage, bytes and seconds as the other pages write them, a rate
    in MB/s, a speed-up with a multiplication sign, a time ratio as "85% of the time",
    anything else (clients) as three significant digits and its unit."""
    if value is None:
        return MISSING
    if unit == "fraction":
        return f"{value * 100:.2g}%" if value < 0.1 else f"{value * 100:.0f}%"
    if unit in ("B", "bytes"):
        return format_size(value)
    if unit == "s":
        return format_duration_s(value)
    if unit == "MB/s":
        return format_rate(value)
    if unit == "x":  # a speed-up
        return f"{value:.3g}\N{MULTIPLICATION SIGN}"
    if unit == "time ratio":
        return f"{value:.0%} of the time"
    return f"{value:.3g} {unit}".strip()


@register.filter
def advice_interval(interval: tuple[float, float] | None, unit: str) -> str:
    """The interval as "0.6% to 1.1%", or "—" without one."""
    if interval is None:
        return MISSING
    low, high = interval
    return f"{advice_value(low, unit)} to {advice_value(high, unit)}"


@register.filter
def verdict_words(verdict: str) -> str:
    """ "copy-first" -> "copy first"; "too-thin" -> "too thin to advise"."""
    return "too thin to advise" if verdict == TOO_THIN else verdict.replace("-", " ")
