"""The runs list on a year of nightly history (target: p95 under 300 ms per request).

    .venv/bin/python benches/run_list_year.py [--samples 30]
    .venv/bin/python benches/page_interactive.py --preset run-list [--samples 10]

Fills the benchmark database (benches/django_bench.py) once with the synthetic year of
benches/dashboards_data.py (365,000 runs, 2% failed and 0.7% timed out, each with its error
class), then times GET /api/v1/runs/ sorted, filtered by error class and both, and the
/runs/ page's HTML, through Django's full request stack (test client), as run_list_api.py
does; the CSV of a month's failures and of the whole year are timed to their last byte.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

from django_bench import percentiles_ms, setup_django

WARM_UP = 3


def requests() -> dict[str, str]:
    month_ago = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused = "error_class=refused"
    return {
        "API, first page (newest first)": "/api/v1/runs/",
        "API, longest wall time first": "/api/v1/runs/?ordering=-wall_s",
        "API, shortest wall time first": "/api/v1/runs/?ordering=wall_s",
        "API, slowest throughput first": "/api/v1/runs/?ordering=throughput_mbps",
        "API, fastest throughput first": "/api/v1/runs/?ordering=-throughput_mbps",
        "API, by status": "/api/v1/runs/?ordering=status",
        "API, error class checksum (the rarest)": "/api/v1/runs/?error_class=checksum",
        "API, error class refused, longest first": f"/api/v1/runs/?{refused}&ordering=-wall_s",
        "API, last 30 days, slowest first": (
            f"/api/v1/runs/?created_after={month_ago}&ordering=throughput_mbps"
        ),
        "page /runs/ (default)": "/runs/",
        "page /runs/?ordering=-wall_s": "/runs/?ordering=-wall_s",
        "page /runs/?error_class=auth": "/runs/?error_class=auth",
    }


def time_get(client: object, url: str, samples: int) -> tuple[list[float], int]:
    times = []
    size = 0
    for i in range(samples + WARM_UP):
        start = time.perf_counter()
        response = client.get(url, SERVER_NAME="localhost")  # type: ignore[attr-defined]
        body = b"".join(response.streaming_content) if response.streaming else response.content
        elapsed = time.perf_counter() - start
        assert response.status_code == 200, body[:300]
        size = len(body)
        if i >= WARM_UP:
            times.append(elapsed)
    return times, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    setup_django()
    import os

    from dashboards_data import ensure_history
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.campaigns.models import Run

    ensure_history(endpoints=100, parameter_sets=10, nights=365, vantage_points=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    client.force_login(user)
    print(f"{Run.objects.count():,} runs; load average {os.getloadavg()}")
    print("| request | bytes | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|---|")
    everything: list[float] = []
    for label, url in requests().items():
        samples, size = time_get(client, url, args.samples)
        everything += samples
        ms = percentiles_ms(samples)
        print(f"| {label} | {size:,} | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |")
    ms = percentiles_ms(everything)
    print(f"| all requests above | | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |")
    month_ago = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for label, url in {
        "CSV, a month's failures": f"/api/v1/runs/csv/?created_after={month_ago}&status=failed",
        "CSV, the whole year": "/api/v1/runs/csv/",
    }.items():
        samples, size = time_get(client, url, 3)
        ms = percentiles_ms(samples)
        print(f"| {label} | {size:,} | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |")
    print(f"load average afterwards {os.getloadavg()}")


if __name__ == "__main__":
    main()
