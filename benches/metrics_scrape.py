"""GET /metrics at WLCG scale (issue 18): 500 endpoints x 10 parameter sets x 3 vantage points
(15,000 series, each with its latest night rolled up and its latest state), 200 live
regressions, three vantage points' workers. Times a scrape and weighs its body, plain and
gzipped (Prometheus asks for gzip).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_metrics_bench \\
        .venv/bin/python benches/metrics_scrape.py [--samples 10]

Makes the rows with bulk_create the first time (a marker site says they are there), then
times `--samples` scrapes through Django's full request stack (test client, no HTTP server)
after 2 warm-ups, and prints a Markdown table with the load average.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from datetime import timedelta
from typing import Any

from django_bench import percentiles_ms, setup_django

ENDPOINTS, SITES, PARAMETER_SETS, POINTS = 500, 50, 10, 3
TOKEN = "bench-scrape-token-0123456789abcdef0123"
MARKER = "bench-metrics-site-0"
WARM_UP = 2


def make_rows() -> None:
    from django.db import connection
    from django.utils import timezone

    from webapp.campaigns.metrics import RUN_METRICS
    from webapp.sites.models import Endpoint, Site, VantagePoint, WorkerHeartbeat
    from webapp.watch.models import Regression, SeriesLatest, SeriesNight

    if Site.objects.filter(name=MARKER).exists():
        return
    print("making 15,000 series ...", flush=True)
    now = timezone.now()
    night = (now - timedelta(days=1)).date()
    sites = Site.objects.bulk_create(Site(name=f"bench-metrics-site-{n}") for n in range(SITES))
    protocols = ["root", "https", "davs", "roots"]
    endpoints = Endpoint.objects.bulk_create(
        Endpoint(
            site=sites[n % SITES],
            name=f"bench-metrics-ep-{n}",
            protocol=protocols[n % 4],
            base_url=f"root://bench-{n}.example.org:1094/",
        )
        for n in range(ENDPOINTS)
    )
    points = VantagePoint.objects.bulk_create(
        VantagePoint(name=f"bench-metrics-vp-{n}") for n in range(POINTS)
    )
    parameter_sets = [
        (method, pattern, read_size, 0.1, 2)
        for method in ("direct", "vector")
        for pattern in ("random", "sequential")
        for read_size in (65536, 1048576, 4194304)
    ][:PARAMETER_SETS]
    figures = {
        m.name: {"median": 42.0 + i, "q1": 40.0, "q3": 44.0, "mad": 1.0, "n": 3}
        for i, m in enumerate(RUN_METRICS)
    }
    key: dict[str, Any]
    nights, latest = [], []
    for endpoint in endpoints:
        for point in points:
            for method, pattern, read_size, fraction, clients in parameter_sets:
                key = dict(
                    endpoint=endpoint,
                    vantage_point=point,
                    method=method,
                    pattern=pattern,
                    read_size=read_size,
                    fraction=fraction,
                    clients=clients,
                )
                nights.append(SeriesNight(**key, night=night, runs=3, succeeded=3, metrics=figures))
                latest.append(
                    SeriesLatest(**key, site_night=night, measured_night=night, last_good=night)
                )
    SeriesNight.objects.bulk_create(nights, batch_size=2000)
    SeriesLatest.objects.bulk_create(latest, batch_size=2000)
    Regression.objects.bulk_create(
        Regression(
            key=f"bench-metrics:{n}",
            tier="breakage",
            metric="availability",
            state="open",
            verdict="regression",
            severity=("critical", "warning", "info")[n % 3],
            summary="bench",
            site=endpoints[n].site,
            endpoint=endpoints[n],
            vantage_point=points[n % POINTS],
            protocol=endpoints[n].protocol,
            method="direct",
            pattern="random",
            read_size=65536,
            fraction=0.1,
            clients=2,
            last_night=night,
            opened_at=now,
        )
        for n in range(200)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would have by the first scrape
    WorkerHeartbeat.objects.bulk_create(
        WorkerHeartbeat(
            hostname=f"bench@{point.name}",
            queue=point.queue,
            pid=1,
            started_at=now,
            last_seen=now,
        )
        for point in points
    )


def scrape(client: Any, encoding: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    response = client.get(
        "/metrics", headers={"Authorization": f"Bearer {TOKEN}", "Accept-Encoding": encoding}
    )
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, response.content[:300]
    return elapsed, response.content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    os.environ["FEDPROBE_METRICS_TOKEN"] = TOKEN
    os.environ.setdefault("FEDPROBE_ALLOWED_HOSTS", "testserver")
    setup_django()
    from django.test import Client

    make_rows()
    client = Client()
    print("| scrape | p50 ms | p95 ms | max ms | body | samples |")
    print("|---|---:|---:|---:|---:|---:|")
    for encoding in ("gzip", "identity"):
        for _ in range(WARM_UP):
            scrape(client, encoding)
        timed = [scrape(client, encoding) for _ in range(args.samples)]
        body = timed[-1][1]
        lines = len((gzip.decompress(body) if encoding == "gzip" else body).splitlines())
        figures = percentiles_ms([elapsed for elapsed, _ in timed])
        print(
            f"| {encoding} | {figures['p50']:.0f} | {figures['p95']:.0f} | {figures['max']:.0f} "
            f"| {len(body) / 1e6:.2f} MB ({lines:,} lines) | {args.samples} |"
        )
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
