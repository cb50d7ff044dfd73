"""Template filters for figures, as webapp.core.units writes them: {{ file.size|size }} ->
"16 MiB", {{ run.throughput_mbps|rate }} -> "968.4 MB/s", {{ run.latency_p50_us|latency_us }}
-> "1.23 ms", {{ run.open_s|duration_s }} -> "26.1 ms". None is "—"."""

from __future__ import annotations

from django import template

from webapp.core.units import format_duration_s, format_latency_us, format_rate, format_size

register = template.Library()

MISSING = "—"


@register.filter
def size(n_bytes: int | float | None) -> str:
    return MISSING if n_bytes is None else format_size(n_bytes)


@register.filter
def rate(mbps: float | None, digits: int = 1) -> str:
    return MISSING if mbps is None else format_rate(mbps, int(digits))


@register.filter
def latency_us(us: float | None) -> str:
    return MISSING if us is None else format_latency_us(us)


@register.filter
def duration_s(seconds: float | None) -> str:
    return MISSING if seconds is None else format_duration_s(seconds)
