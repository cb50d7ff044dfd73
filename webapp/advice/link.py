"""The link the model is given, estimated from the runs themselves (docs/advice.md, "The
model"): never typed in, so that the model's predictions rest on the same runs as the
measurements they are set beside."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from webapp.advice import model
from webapp.advice.evidence import Sample
from webapp.advice.model import COPY_EXTRA_RTTS, SESSION_RTTS, Link
from workers.engine.params import Method, Pattern

# Synchronous patterns: one read in flight.
SYNC_PATTERNS = (Pattern.SEQUENTIAL, Pattern.RANDOM, Pattern.SKIP)


def estimate_link(samples: Sequence[Sample]) -> Link | None:
    """The link of one endpoint and vantage point: None without a round-trip time.

    - round-trip time: the median preflight round trip (else the fastest synchronous
      read's median latency);
    - bandwidth: the highest rate any run moved bytes at, its session's round trips left
      out (a lower bound on the link: under a cap, the cap);
    - overhead: the median of synchronous reads' median latency less a round trip and the
      read's bytes at that rate;
    - the copy tool's start: the median copy time of one client less what the model says
      the copy itself costs."""
    rtt = _rtt(samples)
    if rtt is None:
        return None
    rates = [moved_bytes(s) / busy for s in samples if (busy := busy_s(s, rtt)) > 0]
    bandwidth = max(rates, default=0.0) or None
    link = Link(rtt_s=rtt, bandwidth_bps=bandwidth)
    overheads = [
        s.latency_p50_s - rtt - link.transfer_s(s.read_size)
        for s in samples
        if _sync_direct(s) and s.latency_p50_s is not None
    ]
    overhead = max(0.0, statistics.median(overheads)) if overheads else 0.0
    link = Link(rtt_s=rtt, bandwidth_bps=bandwidth, overhead_s=overhead)
    setups = [
        min(s.times)
        - (SESSION_RTTS + COPY_EXTRA_RTTS) * rtt
        - overhead
        - link.transfer_s(s.file_size)
        for s in samples
        if s.method == Method.COPY and s.clients == 1 and s.readahead == 0
    ]
    setup = max(0.0, statistics.median(setups)) if setups else 0.0
    return Link(rtt_s=rtt, bandwidth_bps=bandwidth, overhead_s=overhead, copy_setup_s=setup)


def moved_bytes(sample: Sample) -> int:
    """Bytes a run moved over the link: a copy's whole files, else what its clients got."""
    if sample.method != Method.DIRECT:
        return sample.clients * sample.files * sample.file_size
    return max(sample.bytes_wire, sample.bytes_read)


def busy_s(sample: Sample, rtt: float) -> float:
    """A run's time less the round trips of its session (and a copy's first chunk): the
    time its bytes took."""
    rtts = model.SESSION_RTTS + (model.COPY_EXTRA_RTTS if sample.method != Method.DIRECT else 0)
    return sample.wall_s - rtts * rtt


def _rtt(samples: Sequence[Sample]) -> float | None:
    preflight = [s.preflight_rtt_s for s in samples if s.preflight_rtt_s]
    if preflight:
        return statistics.median(preflight)
    latencies = [s.latency_p50_s for s in samples if _sync_direct(s) and s.latency_p50_s]
    return min(latencies, default=None)


def _sync_direct(sample: Sample) -> bool:
    return (
        sample.method == Method.DIRECT
        and sample.pattern in SYNC_PATTERNS
        and sample.readahead == 0
        and sample.clients == 1
    )
