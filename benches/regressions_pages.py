"""The regression pages and API with many regressions in PostgreSQL (target: p95 under 200 ms).

    .venv/bin/python benches/regressions_pages.py --regressions 30000 --samples 30

Fills the benchmark database (benches/django_bench.py) once with `--regressions` regressions
over 500 endpoints on 100 sites and 3 vantage points (a year of them: 10% still live, the
rest resolved; severities and verdicts mixed; 1 in 20 silenced), and 60 nights of
SeriesNight rows for the 3 vantage points of one regression's series. Then times, through
Django's full request stack (test client, without an HTTP server), the regressions page
(live ones, severity first), the API list with filters, one regression's page and API
detail (its series over the detector's windows, other vantage points, events), and home.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, date, datetime, timedelta

from django_bench import percentiles_ms, setup_django

PREFIX = "bench-regr"
SET = {"method": "direct", "pattern": "random", "read_size": 65536, "fraction": 0.1, "clients": 4}


def seed(total: int) -> None:
    from webapp.sites.models import Endpoint, Site, VantagePoint
    from webapp.watch.models import Regression

    have = Regression.objects.filter(key__startswith=PREFIX).count()
    if have >= total:
        return
    print(f"seeding {total - have} regressions ...")
    sites = [Site.objects.get_or_create(name=f"{PREFIX}-site-{i}")[0] for i in range(100)]
    endpoints = [
        Endpoint.objects.get_or_create(
            name=f"{PREFIX}-endpoint-{i}",
            defaults={"site": sites[i % 100], "protocol": "root", "base_url": "root://b:1094/"},
        )[0]
        for i in range(500)
    ]
    vps = [VantagePoint.objects.get_or_create(name=f"{PREFIX}-vp-{i}")[0] for i in range(3)]
    rng = random.Random(1)
    now = datetime.now(UTC)
    batch = []
    for n in range(have, total):
        live = n % 10 == 0
        opened = now - timedelta(seconds=rng.uniform(0, 365 * 86400))
        endpoint = rng.choice(endpoints)
        batch.append(
            Regression(
                key=f"{PREFIX}:{n}",
                tier=rng.choice(["breakage", "shift"]),
                metric=rng.choice(["throughput_mbps", "open_s", "availability"]),
                state=rng.choice(["open", "acknowledged", "pending"]) if live else "resolved",
                verdict=rng.choice(["regression", "suspicious"]),
                severity=rng.choice(["critical", "warning", "warning", "info"]),
                summary="throughput down",
                endpoint=endpoint,
                site=endpoint.site,
                vantage_point=rng.choice(vps),
                protocol="root",
                **SET,
                detector=_detector(opened.date()),
                blame={"target": "site", "rule": "one series"},
                change_night=opened.date(),
                baseline=100.0,
                current=60.0,
                change_pct=-40.0,
                last_night=opened.date() + timedelta(days=5),
                opened_at=opened,
                resolved_at=None if live else opened + timedelta(days=6),
                silenced_until=now + timedelta(days=3) if n % 20 == 0 else None,
            )
        )
        if len(batch) == 5000:
            Regression.objects.bulk_create(batch)
            batch = []
    Regression.objects.bulk_create(batch)


def _detector(change: date) -> dict[str, object]:
    return {
        "name": "e-divisive",
        "parameters": {"pvalue": 0.01},
        "baseline_window": [(change - timedelta(days=28)).isoformat(), change.isoformat()],
        "target_window": [change.isoformat(), (change + timedelta(days=5)).isoformat()],
    }


def detail_regression() -> int:
    """One live regression whose series (and its other vantage points') has 60 nights."""
    from webapp.sites.models import VantagePoint
    from webapp.watch.models import Regression, SeriesNight

    regression = Regression.objects.filter(key__startswith=PREFIX, state="open").first()
    assert regression is not None and regression.change_night is not None
    if not SeriesNight.objects.filter(endpoint=regression.endpoint).exists():
        first = regression.change_night - timedelta(days=50)
        SeriesNight.objects.bulk_create(
            SeriesNight(
                endpoint=regression.endpoint,
                vantage_point=vp,
                night=first + timedelta(days=d),
                **SET,
                runs=4,
                succeeded=4,
                metrics={"throughput_mbps": {"median": 100.0, "q1": 95.0, "q3": 105.0, "n": 4}},
            )
            for vp in VantagePoint.objects.filter(name__startswith=PREFIX)
            for d in range(60)
        )
    return regression.pk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regressions", type=int, default=30_000)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    setup_django()

    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.sites.models import Site
    from webapp.watch.models import Regression

    seed(args.regressions)
    pk = detail_regression()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    page = Client(HTTP_HOST="127.0.0.1")
    page.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}", HTTP_HOST="127.0.0.1")
    site = Site.objects.get(name=f"{PREFIX}-site-7")
    live = Regression.objects.exclude(state="resolved").count()
    print(f"{Regression.objects.count()} regressions ({live} live) in the database")
    requests = {
        "page /regressions/ (live)": (page, "/regressions/"),
        "page /regressions/ page 20": (page, "/regressions/?page=20"),
        "API list (all, first 50)": (api, "/api/v1/regressions/"),
        "API list state=open&blame=site": (api, "/api/v1/regressions/?state=open&blame=site"),
        "API list one site": (api, f"/api/v1/regressions/?site={site.pk}"),
        "page /regressions/{id}/": (page, f"/regressions/{pk}/"),
        "API /regressions/{id}/": (api, f"/api/v1/regressions/{pk}/"),
        "home /": (page, "/"),
    }
    print("| request | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    for label, (client, url) in requests.items():
        samples = []
        for i in range(args.samples + 3):
            start = time.perf_counter()
            response = client.get(url)
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, (url, response.status_code)
            if i >= 3:  # warm-up
                samples.append(elapsed)
        p = percentiles_ms(samples)
        print(f"| {label} | {p['p50']:.0f} | {p['p95']:.0f} | {p['max']:.0f} |")


if __name__ == "__main__":
    main()
