"""How pages write figures, in one place (static/js/units.js is the same for scripts): sizes
in binary units (1 MiB = 1,048,576 bytes), rates in MB/s (10^6 bytes/s, the run JSON's
throughput_mbps), latencies under 1 ms in µs and from 1 ms in ms."""

from __future__ import annotations

from workers.engine.units import format_size

__all__ = ["format_duration_s", "format_latency_us", "format_rate", "format_size"]


def format_rate(mbps: float, digits: int = 1) -> str:
    """968.44 -> "968.4 MB/s"."""
    return f"{mbps:,.{digits}f} MB/s"


def format_latency_us(us: float) -> str:
    """850 -> "850 µs", 1234 -> "1.23 ms", 45678 -> "45.7 ms", 123456 -> "123 ms"."""
    if abs(us) < 999.5:
        return f"{us:.0f} µs"
    ms = us / 1000
    digits = 2 if abs(ms) < 10 else 1 if abs(ms) < 100 else 0
    return f"{ms:,.{digits}f} ms"


def format_duration_s(seconds: float) -> str:
    """A time in seconds: under 1 s as a latency ("2.30 ms"), else "3.25 s"."""
    if abs(seconds) < 1:
        return format_latency_us(seconds * 1e6)
    return f"{seconds:,.{2 if abs(seconds) < 100 else 0}f} s"
