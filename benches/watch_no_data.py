"""No data at WLCG scale: what finding the stopped series costs a night's pass (target:
bounded, one grouped query, not one per series).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_bench_no_data \\
        .venv/bin/python benches/watch_no_data.py [--endpoints 500 --parameter-sets 10 \\
        --vantage-points 3 --nights 60 --stopped 150]

Makes the federation with `history synthesize` (one night: its sites, endpoints, vantage
points and scheduled campaigns), writes the rollup rows of every series for `--nights` nights
straight in SQL (15,000 series x 60 nights by default), takes the last two nights away from
the series of `--stopped` (endpoint, vantage point, read size) groups, then times
`series_no_data` for the last night: the first call (which opens their no-data regressions)
and the next (nothing to change), and counts their queries.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import date, timedelta

from django_bench import setup_django


def ensure_federation(endpoints: int, parameter_sets: int, vantage_points: int) -> None:
    """The synthetic federation, its endpoints enabled (synthesize disables them so that its
    campaigns launch nothing; no beat runs here, and a disabled endpoint is not missed)."""
    from django.core.management import call_command

    from webapp.sites.models import Endpoint

    if Endpoint.objects.count() != endpoints:
        call_command(
            "history",
            "synthesize",
            endpoints=endpoints,
            parameter_sets=parameter_sets,
            vantage_points=vantage_points,
            nights=1,
            clear=True,
            plant=False,
        )
    Endpoint.objects.update(enabled=True)


def write_rollups(last: date, nights: int) -> int:
    """One rollup row per series (the runs' parameter sets) and night, good nights only."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM watch_seriesnight")
        cursor.execute(
            """
            INSERT INTO watch_seriesnight (night, endpoint_id, vantage_point_id, method,
                pattern, read_size, fraction, clients, runs, succeeded, partial, failed,
                tester_faults, errors, metrics, server_versions, client_versions, updated_at)
            SELECT d::date, s.endpoint_id, s.vantage_point_id, s.method, s.pattern,
                s.read_size, s.fraction, s.clients, 1, 1, 0, 0, 0, '{}'::jsonb,
                '{"throughput_mbps": {"median": 100, "q1": 95, "q3": 105, "mad": 3, "n": 1}}',
                '[]'::jsonb, '[]'::jsonb, now()
            FROM (SELECT DISTINCT endpoint_id, vantage_point_id, method, pattern, read_size,
                         fraction, clients FROM campaigns_run) s
            CROSS JOIN generate_series(%s::date, %s::date, interval '1 day') d
            """,
            [last - timedelta(days=nights - 1), last],
        )
        return int(cursor.rowcount)


def stop_series(last: date, stopped: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            DELETE FROM watch_seriesnight WHERE night > %s AND (endpoint_id, vantage_point_id,
                read_size) IN (SELECT DISTINCT endpoint_id, vantage_point_id, read_size
                               FROM watch_seriesnight ORDER BY 1, 2, 3 LIMIT %s)
            """,
            [last - timedelta(days=2), stopped],
        )
        cursor.execute("ANALYZE watch_seriesnight")  # as autovacuum would after a night


def timed(label: str, last: date) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from webapp.watch.models import Regression
    from webapp.watch.nodata import series_no_data
    from webapp.watch.series import vantage_point_nights

    measuring = vantage_point_nights(first=last - timedelta(days=59), last=last)
    live = {r.key: r for r in Regression.objects.filter(state__in=Regression.LIVE)}
    load = os.getloadavg()[0]
    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        series_no_data(
            night=last, now=timezone.now(), live=live, measuring=measuring, downtime=frozenset()
        )
        took = time.perf_counter() - start
    no_data = Regression.objects.filter(state=Regression.State.NO_DATA).count()
    print(
        f"{label}: {took * 1000:.0f} ms, {len(queries.captured_queries)} queries "
        f"(load {load:.1f}); {no_data} no-data regressions"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=500)
    parser.add_argument("--parameter-sets", type=int, default=10)
    parser.add_argument("--vantage-points", type=int, default=3)
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--stopped", type=int, default=150)
    args = parser.parse_args()
    setup_django()
    from webapp.watch.models import Regression

    ensure_federation(args.endpoints, args.parameter_sets, args.vantage_points)
    last = date.today() + timedelta(days=30)
    rows = write_rollups(last, args.nights)
    stop_series(last, args.stopped)
    Regression.objects.all().delete()
    print(
        f"{rows:,} rollup rows; the series of {args.stopped} (endpoint, vantage point, read "
        "size) groups stopped two nights ago"
    )
    timed("first call (opens them)", last)
    timed("next call (nothing to change)", last)


if __name__ == "__main__":
    main()
