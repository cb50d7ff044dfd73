"""The run detail of a 256-client run on the server: its chart data (run_charts), the page's
HTML and the API's run detail.

    .venv/bin/python benches/run_detail_page.py --trials 20
    .venv/bin/python benches/page_interactive.py --preset run-detail   # the page in Chromium

The run is a real 256-client run of the engine (file:// on a scratch file, random 4 KiB
reads; see ingest_256.py), stored the way a worker stores it, in the campaign
`bench-run-detail` of the bench database (benches/django_bench.py). It is made on first use
and kept, so that the page_interactive preset opens the same run.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from django_bench import percentiles_ms, setup_django

CAMPAIGN = "bench-run-detail"


def bench_run(clients: int = 256) -> Any:
    """The benchmark's measured run of `clients` clients, made the first time."""
    from webapp.campaigns.models import Run

    run = Run.objects.filter(campaign__name=CAMPAIGN, clients=clients, status="succeeded")
    return run.first() or _stored_run(clients)


def _stored_run(clients: int) -> Any:
    from ingest_256 import real_run_json

    from webapp.campaigns.models import Campaign, Run
    from webapp.campaigns.services import run_claim, run_ingest
    from webapp.sites.models import Endpoint, Site, TestFile
    from webapp.sites.services import vantage_point_local

    print(f"measuring a real {clients}-client run ...")
    run_json = real_run_json(clients)
    site, _ = Site.objects.get_or_create(name=CAMPAIGN)
    endpoint, _ = Endpoint.objects.get_or_create(
        name=f"{CAMPAIGN}-file", defaults={"site": site, "protocol": "file", "base_url": "file://"}
    )
    test_file, _ = TestFile.objects.get_or_create(
        endpoint=endpoint, path="/tmp/file-16M", defaults={"size": 16 * 1024 * 1024}
    )
    campaign, _ = Campaign.objects.get_or_create(name=CAMPAIGN)
    run = Run.objects.create(
        campaign=campaign, endpoint=endpoint, test_file=test_file,
        vantage_point=vantage_point_local(), method="direct", pattern="random",
        read_size=4096, fraction=0.01, clients=clients,
    )  # fmt: skip
    run_claim(run_id=run.pk, worker="bench")
    assert run_ingest(run_id=run.pk, run_json=run_json)
    return run


def server_side(run_id: int, trials: int) -> dict[str, dict[str, float]]:
    """run_charts on a freshly read run; the page and the API detail through Django's client,
    as a viewer."""
    from django.contrib.auth.models import User
    from django.test import Client

    from webapp.accounts.services import user_set_role
    from webapp.campaigns.run_detail import run_charts
    from webapp.campaigns.selectors import run_detail

    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    paths = {"page": f"/runs/{run_id}/", "api": f"/api/v1/runs/{run_id}/"}
    timings: dict[str, list[float]] = {"run_charts": [], "page": [], "api": []}
    for _ in range(trials):
        started = time.perf_counter()
        run_charts(run_detail(run_id))
        timings["run_charts"].append(time.perf_counter() - started)
        for name, path in paths.items():
            started = time.perf_counter()
            assert client.get(path).status_code == 200
            timings[name].append(time.perf_counter() - started)
    return {name: percentiles_ms(samples) for name, samples in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--clients", type=int, default=256)
    args = parser.parse_args()
    setup_django()
    run = bench_run(args.clients)
    print(f"load average {os.getloadavg()}; run {run.pk}, {args.clients} clients")
    print("| request | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    for name, ms in server_side(run.pk, args.trials).items():
        print(f"| {name} | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |")


if __name__ == "__main__":
    main()
