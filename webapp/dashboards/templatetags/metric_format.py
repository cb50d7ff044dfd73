"""Template filters for the dashboards: {{ cell.value|metric_value:"bytes_wire" }} -> "4 MiB",
{{ cell.since_good_s|age }} -> "3 h"."""

from __future__ import annotations

from django import template

from workers.engine.units import format_size

register = template.Library()

_DIGITS = {"throughput_mbps": 1, "wall_s": 3, "open_s": 4, "ttfb_s": 4, "cpu_s": 3}


@register.filter
def metric_value(value: float | None, metric: str) -> str:
    """A metric's value as the tables show it (the unit is in the column or the title)."""
    if value is None:
        return ""
    if metric == "bytes_wire":
        return format_size(value)
    if metric.startswith("latency_"):
        return f"{value:,.0f}"
    return f"{value:,.{_DIGITS.get(metric, 3)}f}"


@register.filter
def age(seconds: float | None) -> str:
    """How long ago, roughly: "45 s", "12 min", "5 h", "3 d"."""
    if seconds is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{max(0, int(seconds))} s"


@register.filter
def percent(ratio: float | None) -> str:
    """A change as a signed percentage: 0.42 -> "+42%"."""
    if ratio is None:
        return ""
    return f"{ratio * 100:+.0f}%"
