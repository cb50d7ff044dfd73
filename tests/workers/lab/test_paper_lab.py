"""The paper profile reproduces the papers' findings in numbers (issue 19, item 5): at the
near site (26 ms behind an 8 MB/s link) the crossover of direct reading and copying first,
the client sweep flattening at the link, and async and vector reads filling the link while
sync reads pay a round trip each, each set beside the advice's model (webapp/advice/model.py).

Measured with the engine directly (run_probe), as benches/paper_lab.py does with more runs.
Kept lean: one paper lab for the module with one 16 MiB file, one run per point. The
tolerances are justified where they are asserted: the lab is a shared 2-core VM, and the
suite runs beside other work, so a client's own scheduling adds milliseconds to each read.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webapp.advice import model
from webapp.advice.crossings import crossings
from workers.engine import Method, Pattern, RunParams, RunResult, run_probe
from workers.lab import PROFILES, Lab
from workers.lab.errors import PortTaken
from workers.lab.files import MiB
from workers.lab.ports import free_base_port

pytestmark = pytest.mark.lab

NEAR = "near-root"
SIZE = 16 * MiB
FILE = "/fedprobe/file-16M"
RTT_S = PROFILES["paper"].rtt_ms["near"] / 1000
CAP_BPS = (PROFILES["paper"].bandwidth("near") or 0.0) * 1e6
LINK = model.Link(rtt_s=RTT_S, bandwidth_bps=CAP_BPS)


@pytest.fixture(scope="module")
def paper_lab() -> Iterator[Lab]:
    """A lab of the paper profile for this module (the session's lab is the test profile's)."""
    state_dir = Path(tempfile.mkdtemp(prefix="fedprobe-paper-numbers-", dir="/tmp"))
    state_dir.chmod(0o755)
    started = None
    try:
        for attempt in range(3):
            sizes = [MiB, SIZE]
            lab = Lab(state_dir, profile="paper", base_port=free_base_port(), file_sizes=sizes)
            lab.progress = None
            try:
                lab.up()
            except PortTaken:
                if attempt == 2:
                    raise
                continue
            started = lab
            break
        assert started is not None
        yield started
    finally:
        if started is not None:
            started.down()
        shutil.rmtree(state_dir, ignore_errors=True)


def probe(
    lab: Lab, method: Method, pattern: Pattern, read_size: int, file: str = FILE, **axes: Any
) -> RunResult:
    url = lab.endpoint(NEAR).file_url(file)
    params = RunParams(urls=(url,), method=method, pattern=pattern, read_size=read_size)
    run = run_probe(dataclasses.replace(params, **axes))
    assert [c.error for c in run.clients if not c.ok] == []
    return run


def wall(run: RunResult) -> float:
    """A client's wall time, as the advice compares them (session, reads, copy, close)."""
    (client,) = run.clients
    return client.wall_s


def mean_read_s(run: RunResult) -> float:
    """A sync read's mean time (the latency histogram's exact total over its count)."""
    (client,) = run.clients
    histogram = client.latency["read"]
    return histogram.total_ns / histogram.count / 1e9


@pytest.fixture(scope="module")
def measured_link(paper_lab: Lab) -> model.Link:
    """The model's link (issue 19 item 4: from the measured round-trip time, bandwidth and
    per-request overhead): the RTT and cap the lab configures, the per-request overhead
    that 20 sync 1 kB reads show beyond them (the client's, the relay's and the server's
    time per request: ~0.5 ms on a quiet VM, several ms under load), and the copy tool's
    start from a copy of a 1 MiB file (xrdcp's process and local file, ~0.1-0.2 s). Measured
    apart from the runs whose crossover is compared with the model's."""
    reads = probe(paper_lab, Method.DIRECT, Pattern.RANDOM, 1000, fraction=20_000 / SIZE)
    overhead = max(0.0, mean_read_s(reads) - LINK.read_s(1000))
    link = dataclasses.replace(LINK, overhead_s=overhead)
    small = probe(paper_lab, Method.COPY, Pattern.SEQUENTIAL, MiB, file="/fedprobe/file-1M")
    setup = wall(small) - model.copy_s(link, file_size=MiB)
    return dataclasses.replace(link, copy_setup_s=max(0.0, setup))


def test_the_near_site_link_is_the_papers(paper_lab: Lab) -> None:
    near = paper_lab.endpoint(NEAR)
    assert (near.rtt_ms, near.bandwidth_mbps) == (26.0, 8.0)
    assert paper_lab.endpoint("local-file").bandwidth_mbps is None


@pytest.mark.parametrize(
    ("read_size", "fractions"),
    [(1000, (0.0025, 0.005)), (MiB, (0.5, 1.0))],
    ids=["1kB", "1MiB"],
)
def test_crossover_fraction_is_the_models_within_25_percent(
    paper_lab: Lab, measured_link: model.Link, read_size: int, fractions: tuple[float, float]
) -> None:
    # Two fractions around the predicted crossover (1 kB: ~0.45%, 42 and 84 reads of 26 ms;
    # 1 MiB: ~85%, 8 and 16 reads of 157 ms) and one copy (2.1 s of link): the crossover
    # is where the line through the direct times meets the copy's time.
    direct = [
        probe(paper_lab, Method.DIRECT, Pattern.RANDOM, read_size, fraction=f) for f in fractions
    ]
    copy = probe(paper_lab, Method.COPY, Pattern.RANDOM, read_size, fraction=fractions[-1])
    gaps = [wall(run) - wall(copy) for run in direct]
    found = crossings(fractions, gaps)
    predicted = model.crossover_fraction(measured_link, file_size=SIZE, read_size=read_size)
    assert predicted is not None
    # One crossing, and copying first is the faster above it.
    [(measured, copy_above)] = found or [(-1.0, False)]
    assert copy_above, (gaps, predicted)
    # 25% (issue 19): one run per point on a shared 2-core VM; the bench's repetitions
    # vary by a few percent, its medians lie within ~10% of the model.
    assert abs(measured - predicted) <= 0.25 * predicted, (measured, predicted, measured_link)
    # The papers' answer at 10% of the file: copy first for 1 kB reads, read 1 MiB directly.
    assert (measured < 0.1) == (read_size == 1000)


def aggregate_bps(run: RunResult) -> float:
    """Bytes of all clients over their read phases, from the first start to the last end
    (the clients are released together on the engine's barrier)."""
    reads = [next((s, e) for name, s, e in c.phases if name == "read") for c in run.clients]
    span = max(e for _, e in reads) - min(s for s, _ in reads)
    return sum(c.bytes_read for c in run.clients) / span


def test_client_sweep_flattens_at_the_link_with_the_knee_where_it_flattens(
    paper_lab: Lab,
) -> None:
    # Each client does sync 64 KiB random reads (one per RTT: ~1.7 MB/s alone, paper 003's
    # O(1) MiB/s per job) of 1 MiB; the link gives 8 MB/s to all together. The bench sweeps
    # 1-2-4-8-16-32; 32 is left out here: 32 XrdCl clients starting at once send reverse
    # DNS lookups that this VM's resolver drops now and then, and the 5 s retry would split
    # them into two groups that never share the link.
    counts = [1, 2, 4, 8, 16]
    rates = []
    for clients in counts:
        run = probe(
            paper_lab, Method.DIRECT, Pattern.RANDOM, 64 * 1024, fraction=1 / 16, clients=clients
        )
        rates.append(aggregate_bps(run))
    alone, top = rates[0], max(rates)
    # Below the knee the clients add up: 2 get at least 60% of twice one (the link is a
    # third full, the model says 96%; 85-95% seen, 69% at load 17 where two client
    # processes share the 2 cores with everything else).
    assert rates[1] >= 0.6 * 2 * alone, rates
    # The link caps them all together: never above it (per-connection caps would let 16
    # clients have ~27 MB/s), and 16 clients, three times the knee, get at least 75% of it
    # (95-99% seen; the rest is their own scheduling on a loaded 2-core VM).
    assert top <= 1.05 * CAP_BPS, rates
    assert rates[-1] >= 0.75 * CAP_BPS, rates
    # Found where it flattens: the first count at 85% of the top (the advice's rule) is
    # where the link is full (at least 70% of the cap), at the first sweep count at or
    # past the model's knee (its closed loop of sync clients, calibrated by one client's
    # rate: 5-6 clients here), or the next one: under load the clients' own scheduling on
    # the 2-core VM slows the approach (8 seen quiet, 16 at load 15).
    knee = next(n for n, rate in zip(counts, rates, strict=True) if rate >= model.PLATEAU * top)
    predicted = model.knee(LINK, per_client_bps=alone, read_size=64 * 1024)
    assert predicted is not None
    assert rates[counts.index(knee)] >= 0.7 * CAP_BPS, (knee, rates)
    first = counts.index(next(n for n in counts if n >= predicted))
    assert knee in counts[first : first + 2], (knee, predicted, rates)


def test_async_and_vector_reads_fill_the_link_while_sync_reads_pay_a_round_trip_each(
    paper_lab: Lab,
) -> None:
    # 4 KiB random reads (paper 002 used 10 KB): 40 sync ones (~1 s); async with 64 in
    # flight and readvs of 1024 chunks over half the file (8 MiB, ~1 s of link each).
    sync = probe(paper_lab, Method.DIRECT, Pattern.RANDOM, 4096, fraction=40 * 4096 / SIZE)
    (client,) = sync.clients
    sync_per_s = client.ops / client.read_s
    # One round trip each: never faster than the RTT allows, and at least 70% of it (the
    # 26 ms are the relay's; the client and the server add ~0.5 ms quiet, ~7 ms under load).
    assert 0.7 / LINK.read_s(4096) <= sync_per_s <= 1 / RTT_S, sync_per_s
    predicted = {
        "async": model.async_rate(LINK, read_size=4096, depth=64) * 4096,
        "vector": model.vector_rate(LINK, read_size=4096, chunks=1024) * 4096,
    }
    hiding: list[tuple[Pattern, dict[str, Any]]] = [
        (Pattern.ASYNC, {"depth": 64}),
        (Pattern.VECTOR, {"vector_size": 1024}),
    ]
    for pattern, extra in hiding:
        run = probe(paper_lab, Method.DIRECT, pattern, 4096, fraction=0.5, **extra)
        (client,) = run.clients
        rate = client.bytes_read / client.read_s
        # Approaching the link rate: the model says 8 MB/s (async: 64 x 4 KiB per RTT would
        # be ~10 MB/s, the cap holds it) and 7.6 MB/s (vector: one RTT per 4 MiB); at least
        # 70% of that, and never above the cap.
        assert 0.7 * predicted[pattern.value] <= rate <= 1.05 * CAP_BPS, (pattern, rate)
        # Paper 002's point: latency hiding pays off many times over at this RTT.
        assert rate / (sync_per_s * 4096) >= 20
