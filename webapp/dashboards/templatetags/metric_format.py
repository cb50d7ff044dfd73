"""Template filters for the dashboards: {{ cell.value|metric_value:"bytes_wire" }} -> "4 MiB",
{{ cell.since_good_s|age }} -> "3 h". Figures are written as webapp.core.units writes them."""

from __future__ import annotations

from django import template

from webapp.campaigns.metrics import metric

register = template.Library()


@register.filter
def metric_value(value: float | None, name: str) -> str:
    """A run metric's value as the tables show it (RunMetric.format): sizes binary, times
    and latencies in ms from 1 ms (with their unit); rates bare (their unit is in the column
    or the title)."""
    if value is None:
        return ""
    return metric(name).format(value)


@register.filter
def metric_title(name: str) -> str:
    """A run metric's name in words with its unit (RunMetric.title): "latency_p50_us" ->
    "Read latency p50 (µs)"."""
    return metric(name).title


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
