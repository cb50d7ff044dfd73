"""Template filters for the dashboards: {{ cell.value|metric_value:"bytes_wire" }} -> "4 MiB",
{{ cell.since_good_s|age }} -> "3 h". Figures are written as webapp.core.units writes them."""

from __future__ import annotations

from django import template

from webapp.core.units import format_duration_s, format_latency_us, format_size

register = template.Library()

_DIGITS = {"throughput_mbps": 1}
_TIMES = ("wall_s", "open_s", "ttfb_s", "cpu_s")


@register.filter
def metric_value(value: float | None, metric: str) -> str:
    """A metric's value as the tables show it: sizes binary, times and latencies in ms from
    1 ms (with their unit); others bare (their unit is in the column or the title)."""
    if value is None:
        return ""
    if metric == "bytes_wire":
        return format_size(value)
    if metric.startswith("latency_"):
        return format_latency_us(value)
    if metric in _TIMES:
        return format_duration_s(value)
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
