"""A latency histogram: constant memory per operation kind, mergeable across clients.

Buckets are log-linear (16 sub-buckets per power of two, HdrHistogram-style), so a
recorded latency lands in a bucket at most 6.25% wide; percentiles report the bucket's
midpoint (within ~3% of the true value), clamped to the exact maximum. Recording is a
few integer operations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.engine.results import LatencyHistJson, LatencySummaryJson

SUB_BITS = 4
_SUB_COUNT = 1 << SUB_BITS


def bucket_of(value_ns: int) -> int:
    if value_ns < _SUB_COUNT:
        return max(value_ns, 0)
    shift = value_ns.bit_length() - SUB_BITS - 1
    return ((shift + 1) << SUB_BITS) + ((value_ns >> shift) & (_SUB_COUNT - 1))


def bucket_upper_ns(bucket: int) -> int:
    """The largest value that falls into `bucket`."""
    if bucket < _SUB_COUNT:
        return bucket
    shift = (bucket >> SUB_BITS) - 1
    mantissa = _SUB_COUNT | (bucket & (_SUB_COUNT - 1))
    return ((mantissa + 1) << shift) - 1


@dataclass
class LatencyHistogram:
    """Latencies of one operation kind (open, read, readv, ...) in nanoseconds."""

    counts: dict[int, int] = field(default_factory=dict)
    count: int = 0
    max_ns: int = 0
    total_ns: int = 0

    def record(self, value_ns: int) -> None:
        b = bucket_of(value_ns)
        counts = self.counts
        counts[b] = counts.get(b, 0) + 1
        self.count += 1
        self.total_ns += value_ns
        self.max_ns = max(self.max_ns, value_ns)

    def record_all(self, values: Iterable[int]) -> None:
        for value in values:
            self.record(value)

    def merge(self, other: LatencyHistogram) -> None:
        for b, n in other.counts.items():
            self.counts[b] = self.counts.get(b, 0) + n
        self.count += other.count
        self.total_ns += other.total_ns
        self.max_ns = max(self.max_ns, other.max_ns)

    def percentile_ns(self, q: float) -> int:
        """The value below which a fraction `q` (0..1) of the recorded latencies fall."""
        if not self.count:
            return 0
        rank = max(1, round(q * self.count))
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                lower = bucket_upper_ns(b - 1) + 1 if b else 0
                return min((lower + bucket_upper_ns(b)) // 2, self.max_ns)
        return self.max_ns

    def summary_us(self) -> LatencySummaryJson:
        """{count, p50, p90, p99, max, mean} in microseconds, as the run JSON reports them."""

        def us(ns: float) -> float:
            return round(ns / 1000, 1)

        return {
            "count": self.count,
            "p50": us(self.percentile_ns(0.50)),
            "p90": us(self.percentile_ns(0.90)),
            "p99": us(self.percentile_ns(0.99)),
            "max": us(self.max_ns),
            "mean": us(self.total_ns / self.count) if self.count else 0.0,
        }

    def to_json(self) -> LatencyHistJson:
        return {
            "buckets": {str(b): n for b, n in sorted(self.counts.items())},
            "count": self.count,
            "max_ns": self.max_ns,
            "total_ns": self.total_ns,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LatencyHistogram:
        buckets = data.get("buckets", {})
        assert isinstance(buckets, dict)
        return cls(
            counts={int(b): int(n) for b, n in buckets.items()},
            count=int(str(data.get("count", 0))),
            max_ns=int(str(data.get("max_ns", 0))),
            total_ns=int(str(data.get("total_ns", 0))),
        )
