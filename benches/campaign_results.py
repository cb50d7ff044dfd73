"""The campaign results page on a campaign of a few thousand runs (target: interactive in
under 1.5 s in Chromium; its data is one selector).

    .venv/bin/python benches/campaign_results.py --samples 20

Fills the benchmark database (benches/django_bench.py) once with one campaign in the shape
of paper 000's study: 3 endpoints at 0.5, 26 and 300 ms, methods direct, copy and stage,
patterns sequential, random and async, read sizes 4 KiB, 64 KiB and 1 MiB, fractions 0.1 to
1, 1, 4 and 16 clients, 3 repetitions: 3,645 runs (1,215 parameter sets), with figures from
a simple model of latency and bandwidth (direct 4 KiB reads at 300 ms end as timeouts, as
in the paper). Then times, through Django's full request stack (test client, no HTTP
server), the selector alone, GET /api/v1/campaigns/{id}/results/ and the page's HTML, and
prints the size of the data the page carries. The page's time to interactive in Chromium is
measured by benches/page_interactive.py with the page's URL.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import time
from collections.abc import Callable
from typing import Any

from django_bench import percentiles_ms, setup_django

BENCH_CAMPAIGN = "bench-campaign-results"
GiB = 1 << 30
# name, RTT (s), bandwidth of one connection (B/s)
ENDPOINTS = (("local", 0.0005, 400e6), ("near", 0.026, 100e6), ("far", 0.3, 20e6))
METHODS = ("direct", "copy", "stage")
PATTERNS = ("sequential", "random", "async")
READ_SIZES = (4096, 65536, 1 << 20)
FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)
CLIENTS = (1, 4, 16)
REPETITIONS = 3
DEADLINE_S = 6 * 3600
DEPTH = 64
LOCAL_READ_BPS = 2e9


def modelled(
    rng: random.Random, rtt: float, rate: float, cell: tuple[str, str, int, float, int]
) -> dict[str, object]:
    """A run's aggregates from RTT and bandwidth: sync reads pay an RTT each, async ones
    share it over the depth, copies move the whole file first; clients share the link."""
    method, pattern, read_size, fraction, clients = cell
    needed = math.ceil(fraction * GiB)
    ops = math.ceil(needed / read_size)
    per_client = rate / clients**0.8
    open_s = 2 * rtt + 0.002 * clients
    per_op = rtt / DEPTH if pattern == "async" else rtt + (0.0002 if pattern == "random" else 0)
    if method == "direct":
        wall = open_s + ops * per_op + needed / per_client
        wire = needed * 1.01
    else:
        copy_s = GiB / (per_client * 1.2)
        local = needed / LOCAL_READ_BPS + ops * 5e-6
        wall = open_s + (max(copy_s, local) * 1.05 if method == "stage" else copy_s + local)
        wire = GiB
    wall *= rng.lognormvariate(0, 0.05)
    if wall > DEADLINE_S:
        return {"status": "timeout", "errors": [{"class": "timeout", "message": "deadline"}]}
    return {
        "status": "succeeded",
        "wall_s": wall,
        "open_s": open_s * rng.lognormvariate(0, 0.1),
        "ttfb_s": (open_s + rtt) * rng.lognormvariate(0, 0.1),
        "throughput_mbps": needed * clients / wall / 1e6,
        "bytes_requested": needed * clients,
        "bytes_read": needed * clients,
        "bytes_wire": int(wire * clients),
        "result": {"client_throughput_mbps": needed / wall / 1e6},
    }


def seed() -> int:
    from django.db import connection

    from webapp.campaigns.models import Campaign, Run
    from webapp.sites.models import Endpoint, Site, TestFile
    from webapp.sites.services import vantage_point_local

    campaign = Campaign.objects.filter(name=BENCH_CAMPAIGN).first()
    if campaign is not None:
        return campaign.pk
    print("seeding the campaign ...")
    campaign = Campaign.objects.create(
        name=BENCH_CAMPAIGN,
        methods=list(METHODS),
        patterns=list(PATTERNS),
        read_sizes=list(READ_SIZES),
        fractions=list(FRACTIONS),
        clients=list(CLIENTS),
        repetitions=REPETITIONS,
    )
    vantage_point = vantage_point_local()
    campaign.vantage_points.set([vantage_point])
    rng = random.Random(1)
    runs = []
    for name, rtt, rate in ENDPOINTS:
        site, _ = Site.objects.get_or_create(name=f"bench-results-{name}")
        endpoint, _ = Endpoint.objects.get_or_create(
            name=f"bench-results-{name}-root",
            defaults={"site": site, "protocol": "root", "base_url": f"root://{name}.example"},
        )
        test_file, _ = TestFile.objects.get_or_create(
            endpoint=endpoint, path="/bench/file-1G", defaults={"size": GiB, "is_default": True}
        )
        campaign.endpoints.add(endpoint)
        for cell in itertools.product(METHODS, PATTERNS, READ_SIZES, FRACTIONS, CLIENTS):
            for repetition in range(REPETITIONS):
                method, pattern, read_size, fraction, clients = cell
                runs.append(
                    Run(
                        campaign=campaign,
                        endpoint=endpoint,
                        test_file=test_file,
                        vantage_point=vantage_point,
                        method=method,
                        pattern=pattern,
                        read_size=read_size,
                        fraction=fraction,
                        clients=clients,
                        repetition=repetition,
                        **modelled(rng, rtt, rate, cell),
                    )
                )
    Run.objects.bulk_create(runs, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE campaigns_run")  # plans as for a database that has lived
    return campaign.pk


def bench_endpoint(name: str) -> Any:
    """The benchmark campaign's endpoint at `name` (local, near or far)."""
    from webapp.sites.models import Endpoint

    return Endpoint.objects.get(name=f"bench-results-{name}-root")


def timed(samples: int, call: Callable[[], object]) -> dict[str, float]:
    """p50, p95 and max of `samples` calls, in ms (advice_scale.py times with it too)."""
    durations = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        durations.append(time.perf_counter() - started)
    return percentiles_ms(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    setup_django()

    from django.contrib.auth.models import User
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.campaigns.models import Campaign, Run
    from webapp.dashboards.selectors.results import campaign_results

    campaign = Campaign.objects.get(pk=seed())
    runs = Run.objects.filter(campaign=campaign).count()
    user, _ = User.objects.get_or_create(username="bench-results")
    user_set_role(user=user, role="viewer")
    api = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}", HTTP_HOST="127.0.0.1")
    page = Client(HTTP_HOST="127.0.0.1")
    page.force_login(user)
    api_url = f"/api/v1/campaigns/{campaign.pk}/results/"
    page_url = f"/campaigns/{campaign.pk}/results/"
    assert api.get(api_url).status_code == 200 and page.get(page_url).status_code == 200

    data = campaign_results(campaign=campaign).to_json()
    payload = json.dumps(data, separators=(",", ":"))
    print(f"campaign {campaign.pk}: {runs} runs, {len(data['cells'])} parameter sets")
    print(f"page data: {len(payload) / 1024:.0f} KiB of JSON")
    print(f"page URL: {page_url} (user {user.username}, role viewer)")
    print("| what | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    figures = {
        "selector (3 queries) + to_json": timed(
            args.samples, lambda: campaign_results(campaign=campaign).to_json()
        ),
        f"GET {api_url}": timed(args.samples, lambda: api.get(api_url)),
        f"GET {page_url} (HTML)": timed(args.samples, lambda: page.get(page_url)),
    }
    for what, ms in figures.items():
        print(f"| {what} | {ms['p50']:.0f} | {ms['p95']:.0f} | {ms['max']:.0f} |")


if __name__ == "__main__":
    main()
