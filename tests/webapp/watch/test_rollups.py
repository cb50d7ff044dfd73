"""Nightly rollups: equal to a direct computation over the night's runs (on PostgreSQL with
percentile_cont, and again on the embedded SQLite), idempotent, and incremental."""

from __future__ import annotations

import random
import statistics
import threading
from datetime import date, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from tests.webapp.sqlite import only_on_postgresql
from tests.webapp.watch.nights import NIGHT_ONE, at, night, run, series
from webapp.campaigns.models import Run
from webapp.watch import rollups
from webapp.watch.models import SeriesNight
from webapp.watch.rollups import distribution, rollups_refresh, series_nights_roll_up
from workers.engine.errors import CREDENTIAL_PHASE

pytestmark = pytest.mark.django_db

THROUGHPUTS = [10.0, 12.5, 11.0, 30.0, 9.5]


def _night_of_runs() -> tuple[list[Run], list[Run]]:
    first, second = series(), series(vantage_point="remote")
    runs = [run(first, NIGHT_ONE, throughput_mbps=t, open_s=t / 100) for t in THROUGHPUTS]
    runs += [
        run(first, NIGHT_ONE, status="failed", error="auth"),
        run(first, NIGHT_ONE, status="timeout"),
        run(first, NIGHT_ONE, status="failed", error="lost"),
        run(first, NIGHT_ONE, status="partial", error="short-read", throughput_mbps=5.0),
        run(first, NIGHT_ONE, status="cancelled"),
        run(first, NIGHT_ONE + timedelta(days=1), throughput_mbps=99.0),
    ]
    # Our token expired before any request reached the endpoint: a tester fault, not `auth`.
    expired = run(first, NIGHT_ONE, status="failed", error="auth")
    expired.errors[0]["phase"] = CREDENTIAL_PHASE
    expired.save(update_fields=["errors"])
    runs.append(expired)
    client = "xrootd 6.2.1 (Python bindings)"
    others = [
        run(second, NIGHT_ONE, throughput_mbps=20.0, server_version="v5.6.2", client_version=client)
    ]
    return runs, others


@pytest.mark.sqlite
def test_night_rollup_equals_direct_computation_over_its_runs() -> None:
    _night_of_runs()
    assert series_nights_roll_up(night=NIGHT_ONE) == 2
    row = SeriesNight.objects.get(night=NIGHT_ONE, vantage_point__name="local")
    assert (row.runs, row.succeeded, row.partial, row.failed, row.tester_faults) == (10, 5, 1, 2, 2)
    assert row.errors == {"auth": 1, "timeout": 1, "short-read": 1}
    measured = [*THROUGHPUTS, 5.0]
    median = statistics.median(measured)
    quartiles = statistics.quantiles(measured, n=4, method="inclusive")
    throughput = row.metrics["throughput_mbps"]
    assert throughput["median"] == pytest.approx(median)
    assert throughput["q1"] == pytest.approx(quartiles[0])
    assert throughput["q3"] == pytest.approx(quartiles[2])
    assert throughput["mad"] == pytest.approx(statistics.median(abs(v - median) for v in measured))
    assert throughput["n"] == 6
    assert row.metrics["open_s"]["n"] == 5
    assert "latency_p99_us" not in row.metrics
    other = SeriesNight.objects.get(night=NIGHT_ONE, vantage_point__name="remote")
    assert other.server_versions == ["v5.6.2"]
    assert other.client_versions == ["xrootd 6.2.1 (Python bindings)"]
    assert row.client_versions == []  # runs that name no client (older agents) add none
    assert other.metrics["throughput_mbps"]["mad"] == 0


@pytest.mark.sqlite
def test_two_runs_give_percentile_conts_figures_and_a_nan_is_no_measurement() -> None:
    one = series()
    run(one, NIGHT_ONE, throughput_mbps=10.0, open_s=0.3)
    run(one, NIGHT_ONE, throughput_mbps=13.1, open_s=float("nan"))
    series_nights_roll_up(night=NIGHT_ONE)
    row = SeriesNight.objects.get()
    assert row.metrics["throughput_mbps"] == pytest.approx(distribution([10.0, 13.1]))
    assert row.metrics["throughput_mbps"]["q3"] == pytest.approx(12.325)
    assert row.metrics["open_s"] == pytest.approx(distribution([0.3]))


@pytest.mark.sqlite
def test_rolling_a_night_up_again_changes_no_row_and_drops_rows_without_runs() -> None:
    _, others = _night_of_runs()
    series_nights_roll_up(night=NIGHT_ONE)
    before = {row.pk: row.metrics for row in SeriesNight.objects.all()}
    Run.objects.filter(pk__in=[r.pk for r in others]).update(status="cancelled")
    assert series_nights_roll_up(night=NIGHT_ONE) == 1
    after = {row.pk: row.metrics for row in SeriesNight.objects.all()}
    assert len(after) == 1
    assert after.items() <= before.items()


def test_refresh_rolls_up_only_the_nights_whose_runs_ended_since_the_last_pass() -> None:
    from webapp.watch.models import WatchPass

    one = series()
    for n in range(3):
        run(one, NIGHT_ONE + timedelta(days=n), throughput_mbps=10.0)
    now = at(NIGHT_ONE + timedelta(days=3))
    first = rollups_refresh(now=now)
    assert first.nights == [NIGHT_ONE + timedelta(days=n) for n in range(3)]
    WatchPass.objects.create(now=now, started_at=now, watermark=first.watermark)
    assert rollups_refresh(now=now).nights == []
    late = run(one, NIGHT_ONE, throughput_mbps=20.0, finished=now + timedelta(hours=1))
    later = now + timedelta(hours=2)
    assert rollups_refresh(now=later).nights == [NIGHT_ONE]
    row = SeriesNight.objects.get(night=NIGHT_ONE)
    assert row.runs == 2 and late.throughput_mbps == 20.0


@only_on_postgresql
@pytest.mark.django_db(transaction=True)  # as in production: the pass is in no transaction
@override_settings(FEDPROBE_WATCH_LOOKBACK_NIGHTS=30)
def test_a_first_pass_rolls_up_on_two_connections_the_rows_one_connection_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(7)
    for vantage_point in ("local", "remote"):
        one = series(vantage_point=vantage_point, name=f"e-{vantage_point}")
        for n in range(30):
            for _ in range(3):
                run(one, night(n), throughput_mbps=rng.uniform(50, 150), open_s=rng.random())
            if n % 4 == 0:
                run(one, night(n), status="failed", error="auth")
    threads: set[str] = set()
    backends: set[int] = set()
    roll_up = rollups.series_nights_roll_up_range

    def on_which_connection(**nights: date) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backends.add(cursor.fetchone()[0])
        threads.add(threading.current_thread().name)
        return roll_up(**nights)

    monkeypatch.setattr(rollups, "series_nights_roll_up_range", on_which_connection)

    def rows() -> list[tuple[Any, ...]]:
        return sorted(
            SeriesNight.objects.values_list(
                "endpoint__name", "vantage_point__name", "night", "runs", "failed", "metrics"
            ).order_by()
        )

    def first_pass(connections: int) -> tuple[int, list[tuple[Any, ...]]]:
        SeriesNight.objects.all().delete()
        with override_settings(FEDPROBE_WATCH_ROLLUP_CONNECTIONS=connections):
            refreshed = rollups.rollups_refresh(now=at(night(30)))
        return refreshed.rows, rows()

    together = first_pass(2)
    # Three statements (14 + 14 + 2 nights) in two threads of their own, each on its own
    # connection (closed after each statement), never the pass's.
    assert len(threads) == 2 and threading.current_thread().name not in threads
    assert len(backends) == 3
    threads.clear()
    assert first_pass(1) == together == (60, together[1])
    assert threads == {threading.current_thread().name}
    assert together[1][0][:5] == ("e-local", "local", night(0), 4, 1)
