"""Derived deadlines at a distance: a plan's round trips count, not only its bytes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_16M, MiB
from workers.engine import Pattern, RunParams, run_probe
from workers.engine import params as engine_params
from workers.engine.params import MIN_RATE_BPS

pytestmark = pytest.mark.lab

# A short fixed margin, so what the plan needs decides the deadline (the real one is 60 s).
SHORT_MARGIN_S = 2.0
RTT_MS = 20.0
READ_SIZE = 4096
READS = 500
FILE_SIZE = 16 * MiB


@pytest.fixture
def short_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_params, "DEADLINE_MARGIN_S", SHORT_MARGIN_S)


def small_reads(url: str, pattern: Pattern, clients: int = 1) -> RunParams:
    """READS reads of READ_SIZE bytes each, at random offsets of the 16 MiB file."""
    fraction = READS * READ_SIZE / FILE_SIZE
    return RunParams(
        urls=(url,), pattern=pattern, read_size=READ_SIZE, fraction=fraction, clients=clients
    )


def test_small_sync_reads_at_a_distance_succeed_where_bytes_alone_timed_out(
    lab: Any, relay_to: Any, short_margin: None
) -> None:
    _, url = relay_to("local-root", FILE_16M, rtt_ms=RTT_MS)
    params = small_reads(url, Pattern.RANDOM, clients=2)
    run = run_probe(params).to_json()

    assert run["status"] == "succeeded", run["errors"]
    assert run["ops"] == 2 * READS
    # Each read waits for a round trip through the relay: the run outlasts the deadline its
    # bytes alone gave (margin + bytes at 1 MB/s), and ends within the one it got.
    bytes_only_deadline_s = SHORT_MARGIN_S + READS * READ_SIZE / MIN_RATE_BPS
    assert run["wall_s"] > bytes_only_deadline_s
    assert run["wall_s"] < run["deadline_s"]
    assert run["preflight_rtt_ms"] >= 0.9 * RTT_MS
    rtt_s = run["preflight_rtt_ms"] / 1000
    assert run["deadline_s"] == pytest.approx(params.deadline_s(FILE_SIZE, rtt_s=rtt_s), abs=0.01)


@pytest.mark.parametrize("endpoint", ["local-root", "local-http"])
@pytest.mark.parametrize("pattern", [Pattern.ASYNC, Pattern.VECTOR])
def test_async_and_vector_reads_at_a_distance_get_shorter_deadlines_than_sync_reads(
    lab: Any, relay_to: Any, short_margin: None, endpoint: str, pattern: Pattern
) -> None:
    _, url = relay_to(endpoint, FILE_16M, rtt_ms=RTT_MS)
    params = small_reads(url, pattern)
    run = run_probe(params).to_json()

    assert run["status"] == "succeeded", run["errors"]
    assert run["preflight_rtt_ms"] >= 0.9 * RTT_MS
    sync = dataclasses.replace(params, pattern=Pattern.RANDOM)
    sync_deadline_s = sync.deadline_s(FILE_SIZE, rtt_s=run["preflight_rtt_ms"] / 1000)
    assert run["deadline_s"] >= SHORT_MARGIN_S + READS * READ_SIZE / MIN_RATE_BPS
    assert run["deadline_s"] < sync_deadline_s / 4
