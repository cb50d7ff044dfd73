"""A model of a link, to predict what the runs should measure (issue 19, item 4).

Pure Python, no Django: the advice compares its predictions with the runs, and the lab's
tests and benches compare them with lab measurements. It is deliberately simple, and says
what it assumes, so that a disagreement with a measurement is a finding about the site
rather than about the model:

- A link has a round-trip time, a bandwidth (bytes/s; None = not the limit) and a
  per-request overhead (the server's time to answer one request, plus the client's).
- Every run opens a session: connect, handshake, log in, open, close, SESSION_RTTS round
  trips. Reading directly and copying first both pay it, so it cancels in the crossover.
- A synchronous read waits for its answer before sending the next: each pays one round
  trip, the overhead and its bytes at the link rate. This is what the engine's sequential,
  random and skip patterns do (workers/engine/client.py, one request in flight).
- A copy (xrdcp, or one HTTP GET) asks for the whole file and keeps its requests in flight
  (xrdcp pipelines its chunks; a GET streams): it pays COPY_EXTRA_RTTS round trips on top
  of the session, the copy tool's own start (`copy_setup_s`: a process, a local file), and
  the file at the link rate. Reading the local copy afterwards costs next to nothing.
- With `depth` asynchronous reads in flight, or vector reads of `chunks` chunks, the round
  trip is shared by that many reads, until the link is full.
- Clients share the link: n clients together get n times one client's rate, until the
  link is full; clients of sync reads also wait for each other's bytes on it near the knee
  (client_sweep's Mean Value Analysis). The knee: where the sweep reaches PLATEAU of the
  link.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

# Round trips of a session the engine opens for one file: TCP connect, the protocol's
# handshake, login, open, close (XRootD; an HTTP door needs fewer, a TLS one more, but
# reading directly and copying first pay the same ones, so the crossover does not depend
# on the exact number).
SESSION_RTTS = 5
# What a copy pays beyond the session: the round trip of its first chunk (the rest are
# pipelined behind it).
COPY_EXTRA_RTTS = 1


@dataclass(frozen=True)
class Link:
    """What a client sees of an endpoint: round-trip time (s), bandwidth (bytes/s; None when
    the link is not what limits), per-request overhead (s), and the copy tool's start (s)."""

    rtt_s: float
    bandwidth_bps: float | None
    overhead_s: float = 0.0
    copy_setup_s: float = 0.0

    def transfer_s(self, n_bytes: float) -> float:
        """Seconds to move `n_bytes` at the link rate (0 when the link is not the limit)."""
        if self.bandwidth_bps is None or self.bandwidth_bps <= 0:
            return 0.0
        return n_bytes / self.bandwidth_bps

    def read_s(self, read_size: float) -> float:
        """One synchronous read: a round trip, the overhead, its bytes."""
        return self.rtt_s + self.overhead_s + self.transfer_s(read_size)


def reads_needed(*, file_size: int, read_size: int, fraction: float) -> int:
    """How many reads of `read_size` bytes the engine sends to read `fraction` of a file
    (workers/engine/patterns.py: the needed bytes rounded up to whole reads)."""
    needed = math.ceil(fraction * file_size)
    if needed <= 0 or read_size <= 0:
        return 0
    return math.ceil(needed / read_size)


def direct_read_s(link: Link, *, file_size: int, read_size: int, fraction: float) -> float:
    """Seconds to read `fraction` of the file in place with synchronous reads."""
    reads = reads_needed(file_size=file_size, read_size=read_size, fraction=fraction)
    return SESSION_RTTS * link.rtt_s + reads * link.read_s(read_size)


def copy_s(link: Link, *, file_size: int) -> float:
    """Seconds to copy the whole file first (reading the local copy is not counted)."""
    return (
        (SESSION_RTTS + COPY_EXTRA_RTTS) * link.rtt_s
        + link.copy_setup_s
        + link.overhead_s
        + link.transfer_s(file_size)
    )


def crossover_fraction(link: Link, *, file_size: int, read_size: int) -> float | None:
    """The fraction of the file above which copying first is faster than reading directly
    (reads counted as a continuous number); None when reading directly stays faster up to
    the whole file."""
    if file_size <= 0 or read_size <= 0:
        return None
    per_byte_direct = link.read_s(read_size) / read_size
    copy_extra = copy_s(link, file_size=file_size) - SESSION_RTTS * link.rtt_s
    if per_byte_direct <= 0:
        return None
    fraction = copy_extra / (per_byte_direct * file_size)
    if fraction > 1:
        return None
    return max(fraction, 0.0)


def client_sweep(
    link: Link, *, per_client_bps: float, clients: int, read_size: int | None = None
) -> float:
    """Aggregate bytes/s of `clients` clients each able to get `per_client_bps` alone.

    Streams and copies (no `read_size`): n times one client's rate, at most the link's.
    Sync reads of `read_size` (one request in flight per client): a closed loop, solved by
    Mean Value Analysis, exact for a link shared round robin (as the lab's relay and TCP
    flows share one) and clients away from it for any time per read: each client spends
    Z = read_size / per_client_bps - S away from the link per read (its round trip and
    overheads, from its rate alone) and S = read_size / bandwidth on it; near the knee a
    read also waits for the others' bytes, so the aggregate bends below min(n x alone, link)
    and reaches the link later (benches/paper_lab.py: 7.24 MB/s measured at 8 clients, 7.81
    by this, 8 by the min)."""
    bandwidth = link.bandwidth_bps
    if bandwidth is None or read_size is None or read_size <= 0 or per_client_bps <= 0:
        aggregate = clients * per_client_bps
        return aggregate if bandwidth is None else min(aggregate, bandwidth)
    rates = _closed_loop(bandwidth, per_client_bps=per_client_bps, read_size=read_size)
    return next(rate for n, rate in enumerate(rates, 1) if n >= clients)


def _closed_loop(bandwidth: float, *, per_client_bps: float, read_size: int) -> Iterator[float]:
    """The aggregate bytes/s of 1, 2, 3, ... sync clients on the link (Mean Value Analysis)."""
    on_link = read_size / bandwidth
    away = max(0.0, read_size / per_client_bps - on_link)
    queued = 0.0
    for n in itertools.count(1):
        response = on_link * (1 + queued)
        reads_per_s = n / (away + response)
        queued = reads_per_s * response
        yield reads_per_s * read_size


# The knee: the first client count whose aggregate rate reaches this share of the highest
# (measured: of the sweep's top; modelled: of the link). The advice's answers use it too.
PLATEAU = 0.85
_MAX_CLIENTS = 100_000


def knee(link: Link, *, per_client_bps: float, read_size: int | None = None) -> float | None:
    """The first client count whose aggregate rate (client_sweep) reaches PLATEAU of the
    link: where the sweep flattens. None when the link is not the limit."""
    bandwidth = link.bandwidth_bps
    if bandwidth is None or per_client_bps <= 0:
        return None
    if read_size is None or read_size <= 0:
        return float(max(1, math.ceil(PLATEAU * bandwidth / per_client_bps)))
    rates = _closed_loop(bandwidth, per_client_bps=per_client_bps, read_size=read_size)
    for n, rate in enumerate(itertools.islice(rates, _MAX_CLIENTS), 1):
        if rate >= PLATEAU * bandwidth:
            return float(n)
    return None


def sync_rate(link: Link, *, read_size: int) -> float:
    """Reads per second, one in flight."""
    return 1.0 / link.read_s(read_size)


def async_rate(link: Link, *, read_size: int, depth: int) -> float:
    """Reads per second with `depth` in flight: the round trip shared, up to the link rate."""
    rate = depth / link.read_s(read_size)
    return _capped(link, rate, read_size)


def vector_rate(link: Link, *, read_size: int, chunks: int) -> float:
    """Chunks per second with vector reads of `chunks` chunks each: one round trip and one
    overhead per vector read, the chunks' bytes at the link rate."""
    one = link.rtt_s + link.overhead_s + link.transfer_s(chunks * read_size)
    return _capped(link, chunks / one, read_size)


def _capped(link: Link, reads_per_s: float, read_size: int) -> float:
    if link.bandwidth_bps is None or read_size <= 0:
        return reads_per_s
    return min(reads_per_s, link.bandwidth_bps / read_size)


def redirection_s(link: Link) -> float:
    """What a redirector adds to an open: a session with it before the data server's."""
    return SESSION_RTTS * link.rtt_s + link.overhead_s


def cache_miss_s(origin: Link, *, n_bytes: int) -> float:
    """What a cache miss adds: the cache's session with the origin and the bytes over it."""
    return SESSION_RTTS * origin.rtt_s + origin.overhead_s + origin.transfer_s(n_bytes)


def disagreement(measured: float, predicted: float) -> float:
    """Relative difference of a measurement from its prediction (0.25 = 25%)."""
    if predicted == 0:
        return math.inf if measured else 0.0
    return abs(measured - predicted) / abs(predicted)
