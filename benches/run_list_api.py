"""The run list API with 100k runs in PostgreSQL (target: p95 under 100 ms per request).

    .venv/bin/python benches/run_list_api.py --runs 100000 --samples 40

Fills the benchmark database (benches/django_bench.py) with `--runs` finished runs once
(50 endpoints on 10 sites, 4 vantage points, 5 campaigns, a year of creation times, 3% of
them failed), then times GET /api/v1/runs/ with the filters operators use, through
Django's full request stack (test client: URL routing, token authentication,
permissions, filters, pagination with its COUNT, serialization), without an HTTP server.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

from django_bench import percentiles_ms, setup_django

BENCH_CAMPAIGN = "bench-run-list"


def seed(total: int) -> None:
    from webapp.campaigns.models import Campaign, Run
    from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint

    campaigns = list(Campaign.objects.filter(name__startswith=BENCH_CAMPAIGN))
    have = Run.objects.filter(campaign__in=campaigns).count()
    if have >= total:
        return
    print(f"seeding {total - have} runs ...")
    sites = [Site.objects.get_or_create(name=f"bench-site-{i}")[0] for i in range(10)]
    files = []
    for i in range(50):
        endpoint, _ = Endpoint.objects.get_or_create(
            name=f"bench-endpoint-{i}",
            defaults={
                "site": sites[i % 10],
                "protocol": "root",
                "base_url": f"root://bench-{i}.example.org:1094",
            },
        )
        test_file, _ = TestFile.objects.get_or_create(
            endpoint=endpoint, path="/bench/file-1G", defaults={"size": 1 << 30}
        )
        files.append(test_file)
    vantage_points = [VantagePoint.objects.get_or_create(name=f"bench-vp-{i}")[0] for i in range(4)]
    while len(campaigns) < 5:
        campaigns.append(Campaign.objects.create(name=f"{BENCH_CAMPAIGN}-{len(campaigns)}"))
    rng = random.Random(1)
    now = datetime.now(UTC)
    batch = []
    for _ in range(total - have):
        test_file = rng.choice(files)
        failed = rng.random() < 0.03
        created = now - timedelta(seconds=rng.uniform(0, 365 * 86400))
        batch.append(
            Run(
                campaign=rng.choice(campaigns),
                endpoint_id=test_file.endpoint_id,
                test_file=test_file,
                vantage_point=rng.choice(vantage_points),
                method=rng.choice(["direct", "copy", "stage"]),
                pattern=rng.choice(["sequential", "random", "vector", "async"]),
                read_size=rng.choice([4096, 65536, 1 << 20]),
                fraction=rng.choice([0.01, 0.1, 1.0]),
                clients=rng.choice([1, 4, 16, 64]),
                status="failed" if failed else "succeeded",
                trigger="schedule",
                started_at=created,
                finished_at=created + timedelta(seconds=30),
                wall_s=None if failed else rng.uniform(1, 60),
                throughput_mbps=None if failed else rng.uniform(1, 900),
                bytes_read=None if failed else rng.randrange(1 << 20, 1 << 30),
            )
        )
        if len(batch) == 5000:
            _insert(batch)
            batch = []
    _insert(batch)


def _insert(batch: list[object]) -> None:
    from webapp.campaigns.models import Run

    created = Run.objects.bulk_create(batch)
    # created_at is auto_now_add: set the year of history afterwards.
    Run.objects.bulk_update(
        [Run(pk=run.pk, created_at=run.started_at) for run in created], ["created_at"], 1000
    )


def queries() -> dict[str, str]:
    from webapp.campaigns.models import Campaign
    from webapp.sites.models import Endpoint

    campaign = Campaign.objects.filter(name__startswith=BENCH_CAMPAIGN).order_by("pk").first()
    endpoint = Endpoint.objects.get(name="bench-endpoint-7")
    month_ago = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert campaign is not None
    return {
        "first page (50)": "",
        "500 per page": "?limit=500",
        "one endpoint": f"?endpoint={endpoint.pk}",
        "campaign's failures": f"?campaign={campaign.pk}&status=failed",
        "last 30 days, direct": f"?created_after={month_ago}&method=direct",
        "vantage point, read size": "?vantage_point=bench-vp-2&read_size=4096",
        "page at offset 50,000": "?offset=50000",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args()
    setup_django()

    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.campaigns.models import Run

    seed(args.runs)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    print(f"{Run.objects.count()} runs in the database")
    print("| request | rows | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|---|")
    all_samples = []
    for label, query in queries().items():
        url = f"/api/v1/runs/{query}"
        samples = []
        for i in range(args.samples + 3):
            start = time.perf_counter()
            response = client.get(url, SERVER_NAME="localhost")
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, response.content[:300]
            if i >= 3:  # warm-up
                samples.append(elapsed)
        all_samples += samples
        ms = percentiles_ms(samples)
        rows = response.json()["count"]
        print(f"| {label} | {rows} | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |")
    ms = percentiles_ms(all_samples)
    print(f"all requests: p50 {ms['p50']:.1f} ms, p95 {ms['p95']:.1f} ms")


if __name__ == "__main__":
    main()
