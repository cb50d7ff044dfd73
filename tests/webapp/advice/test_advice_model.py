"""The link model's predictions: the numbers a reader can check by hand."""

from __future__ import annotations

import pytest

from webapp.advice import model
from webapp.advice.model import Link

MIB = 1024 * 1024
# The near site of the paper profile: 26 ms, 100 Mbit/s.
NEAR = Link(rtt_s=0.026, bandwidth_bps=100e6 / 8, overhead_s=0.0005, copy_setup_s=0.05)


def test_a_sync_read_pays_a_round_trip_each() -> None:
    reads = model.reads_needed(file_size=MIB, read_size=1024, fraction=0.1)
    assert reads == 103  # 10% of 1 MiB rounded up to whole 1 kB reads
    session = model.SESSION_RTTS * 0.026
    expected = session + reads * (0.026 + 0.0005 + 1024 / 12.5e6)
    assert model.direct_read_s(NEAR, file_size=MIB, read_size=1024, fraction=0.1) == (
        pytest.approx(expected)
    )


def test_a_copy_pays_a_few_round_trips_and_the_file_at_the_link_rate() -> None:
    expected = 6 * 0.026 + 0.05 + 0.0005 + MIB / 12.5e6
    assert model.copy_s(NEAR, file_size=MIB) == pytest.approx(expected)


def test_small_reads_cross_over_early_and_large_ones_late() -> None:
    small = model.crossover_fraction(NEAR, file_size=MIB, read_size=1024)
    large = model.crossover_fraction(NEAR, file_size=100 * MIB, read_size=MIB)
    assert small is not None and large is not None
    assert small < 0.01  # a few round trips of 1 kB reads already cost a copy of 1 MiB
    assert large > 0.5
    # Around where the model says they cross, the faster of the two changes (the engine
    # sends whole reads, so the times step by one read).
    copy = model.copy_s(NEAR, file_size=MIB)
    below = model.direct_read_s(NEAR, file_size=MIB, read_size=1024, fraction=small * 0.8)
    above = model.direct_read_s(NEAR, file_size=MIB, read_size=1024, fraction=small * 1.2)
    assert below < copy < above


def test_no_crossover_when_reading_directly_stays_faster() -> None:
    fat = Link(rtt_s=0.0001, bandwidth_bps=1e6, overhead_s=0.0, copy_setup_s=1.0)
    assert model.crossover_fraction(fat, file_size=MIB, read_size=MIB) is None


def test_the_client_sweep_flattens_at_the_link() -> None:
    rates = [model.client_sweep(NEAR, per_client_bps=1e6, clients=n) for n in (1, 4, 16, 32)]
    assert rates == [1e6, 4e6, 12.5e6, 12.5e6]
    # The first count at 85% of the link: 10.625 clients' worth, so 11.
    assert model.knee(NEAR, per_client_bps=1e6) == 11
    unlimited = Link(rtt_s=0.026, bandwidth_bps=None)
    assert model.knee(unlimited, per_client_bps=1e6) is None
    assert model.knee(unlimited, per_client_bps=1e6, read_size=65536) is None


def test_sync_clients_wait_for_each_other_on_the_link_near_the_knee() -> None:
    # The paper lab's near link (8 MB/s) and sync 64 KiB reads at 1.65 MB/s a client alone
    # (benches/paper_lab.py measured 1.65, 3.08, 5.47, 7.24, 7.58, 7.94 MB/s at 1-32).
    link = Link(rtt_s=0.026, bandwidth_bps=8e6)
    counts = (1, 2, 4, 8, 16, 32)
    rates = [
        model.client_sweep(link, per_client_bps=1.65e6, clients=n, read_size=65536) for n in counts
    ]
    assert rates[0] == pytest.approx(1.65e6)
    streams = [model.client_sweep(link, per_client_bps=1.65e6, clients=n) for n in counts]
    # Below min(n x alone, link) near the knee, never above the link, and at it far past.
    assert all(r <= s + 1 for r, s in zip(rates, streams, strict=True))
    assert rates[2] < 0.9 * streams[2]
    assert rates[-1] == pytest.approx(8e6, rel=0.01)
    assert rates == sorted(rates)
    # So the knee comes later than where min's two lines meet (4.8 clients).
    assert model.knee(link, per_client_bps=1.65e6, read_size=65536) == 6
    assert model.knee(link, per_client_bps=1.65e6) == 5


def test_async_and_vector_reads_hide_the_round_trip_up_to_the_link_rate() -> None:
    sync = model.sync_rate(NEAR, read_size=1024)
    assert model.async_rate(NEAR, read_size=1024, depth=8) == pytest.approx(8 * sync)
    assert model.vector_rate(NEAR, read_size=1024, chunks=16) > 15 * sync
    link_rate = NEAR.bandwidth_bps / MIB  # type: ignore[operator]
    assert model.async_rate(NEAR, read_size=MIB, depth=64) == pytest.approx(link_rate)
    assert model.vector_rate(NEAR, read_size=MIB, chunks=64) < link_rate
