"""Home, the alerts, the regressions and the dashboards' data on a large synthetic history that
the watch has rolled up (issue 16: p95 under 200 ms at 5.5M runs, pages that do not grow with
the raw history).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_alerts_scale \\
        .venv/bin/python benches/alerts_scale.py [--samples 20] [--pass-first]

Reads a database that already holds a `history synthesize` history (a copy of the shared
templates: 1,395,000 or 5,475,000 runs); `--pass-first` runs the watch's pass first when
none has run (it rolls up every night and stores each series' latest state: minutes at this
size). Then times, through Django's full request stack (test client, without an HTTP server),
home, `/regressions/`, `/alerts/` and `GET /api/v1/alerts/` for 7 days, 30 days and a year,
the regressions API, and compare and the matrix (kept as they were), `--samples` each after
3 warm-ups, and prints a Markdown table with the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta

from dashboards_data import compare_urls, matrix_urls
from django_bench import percentiles_ms, setup_django

WARM_UP = 3


def watch_pass_if_none() -> None:
    from django.utils import timezone

    from webapp.campaigns.models import Run
    from webapp.watch.evaluate import watch_evaluate
    from webapp.watch.models import WatchPass

    if WatchPass.objects.exists():
        return
    last = Run.objects.order_by("-created_at").values_list("created_at", flat=True).first()
    now = max(timezone.now(), (last or timezone.now()) + timedelta(hours=1))
    print(f"the watch's first pass as of {now:%Y-%m-%d %H:%M} ...", flush=True)
    start = time.perf_counter()
    outcome = watch_evaluate(now=now)
    print(f"  {len(outcome.nights)} nights rolled up in {time.perf_counter() - start:.0f} s")


def requests() -> dict[str, str]:
    every = "&".join(
        f"metric={m}" for m in ("throughput_mbps", "wall_s", "open_s", "ttfb_s", "latency_p50_us")
    )
    compare = compare_urls()
    matrix = matrix_urls()
    return {
        "home `/`": "/",
        "`/regressions/` (live)": "/regressions/",
        "`/alerts/` (7 days)": "/alerts/",
        "`/alerts/?days=30`": "/alerts/?days=30",
        "`/alerts/?days=365`": "/alerts/?days=365",
        "API alerts (7 days)": "/api/v1/alerts/",
        "API alerts, 30 days": "/api/v1/alerts/?days=30",
        "API alerts, a year, five metrics": f"/api/v1/alerts/?days=365&{every}",
        "API regressions (first 50)": "/api/v1/regressions/",
        "API regressions, open": "/api/v1/regressions/?state=open",
        "API compare, 20 endpoints, a year": compare["20 endpoints, a year"],
        "API compare, 1 endpoint, 90 days": compare["1 endpoint, 90 days (defaults)"],
        "API matrix (defaults)": matrix["defaults (the most common set)"],
        "API matrix, one site": matrix["one site"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--pass-first", action="store_true")
    parser.add_argument("--only", action="append", help="labels containing this")
    args = parser.parse_args()
    setup_django()

    from django.contrib.auth.models import User
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.campaigns.models import Run
    from webapp.watch.models import Regression, SeriesLatest

    if args.pass_first:
        watch_pass_if_none()
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    page = Client(HTTP_HOST="127.0.0.1")
    page.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}", HTTP_HOST="127.0.0.1")
    runs = Run.objects.order_by().count()
    print(
        f"{runs:,} runs, {SeriesLatest.objects.count():,} series, "
        f"{Regression.objects.count():,} regressions; load average {os.getloadavg()}"
    )
    print("| request | bytes | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|---|")
    for label, url in requests().items():
        if args.only and not any(word in label for word in args.only):
            continue
        client = api if url.startswith("/api/") else page
        samples = []
        for i in range(args.samples + WARM_UP):
            start = time.perf_counter()
            response = client.get(url)
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, (url, response.status_code)
            if i >= WARM_UP:
                samples.append(elapsed)
        ms = percentiles_ms(samples)
        size = len(response.content)
        print(
            f"| {label} | {size:,} | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |",
            flush=True,
        )
    print(f"load average afterwards {os.getloadavg()}")


if __name__ == "__main__":
    main()
