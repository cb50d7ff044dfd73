"""The advice at scale: a campaign results page's answer in words on the 3,645-run campaign
of benches/campaign_results.py (target: under 1 s) and a site page's advice on a site of 4
endpoints and 1,440 runs (target: under 0.5 s).

    .venv/bin/python benches/advice_scale.py --samples 5

Uses the benchmark database (benches/django_bench.py); seeds the campaign of
campaign_results.py and, once, a site of 4 root endpoints with 360 runs each (direct and
copy; sequential, random and async; 3 read sizes; 5 fractions; 1 and 4 clients; 2
repetitions) from the same model of latency and bandwidth.
"""

from __future__ import annotations

import argparse
import itertools
import random

from campaign_results import GiB, modelled, seed, timed
from django_bench import setup_django

BENCH_SITE = "bench-advice-site"
# name, RTT (s), bandwidth (B/s)
DOORS = (("a", 0.002, 200e6), ("b", 0.026, 100e6), ("c", 0.05, 50e6), ("d", 0.3, 20e6))
CELLS = tuple(
    itertools.product(
        ("direct", "copy"),
        ("sequential", "random", "async"),
        (4096, 65536, 1 << 20),
        (0.1, 0.25, 0.5, 0.75, 1.0),
        (1, 4),
    )
)
REPETITIONS = 2


def seed_site() -> int:
    """The site of 4 endpoints and their 1,440 runs (made once)."""
    from webapp.campaigns.models import Campaign, Run
    from webapp.sites.models import Endpoint, Site, TestFile
    from webapp.sites.services import vantage_point_local

    site, created = Site.objects.get_or_create(name=BENCH_SITE)
    if not created:
        return site.pk
    campaign = Campaign.objects.create(name=BENCH_SITE)
    vantage_point = vantage_point_local()
    rng = random.Random(2)
    runs = []
    for name, rtt, rate in DOORS:
        endpoint = Endpoint.objects.create(
            name=f"{BENCH_SITE}-{name}",
            site=site,
            protocol="root",
            base_url=f"root://{name}.advice.example",
        )
        test_file = TestFile.objects.create(
            endpoint=endpoint, path="/bench/file-1G", size=GiB, is_default=True
        )
        for cell in CELLS:
            method, pattern, read_size, fraction, clients = cell
            for repetition in range(REPETITIONS):
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
    return site.pk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    setup_django()

    from webapp.advice.selectors import campaign_advice, site_advice
    from webapp.campaigns.models import Campaign, Run
    from webapp.dashboards.selectors.results import results_cells
    from webapp.dashboards.selectors.results_answer import results_answer
    from webapp.sites.models import Site

    campaign = Campaign.objects.get(pk=seed())
    site = Site.objects.get(pk=seed_site())
    cells = results_cells(runs=Run.objects.filter(campaign=campaign))
    runs = Run.objects.filter(campaign=campaign).count()
    site_runs = Run.objects.filter(endpoint__site=site).count()
    print(f"campaign {campaign.pk}: {runs} runs; site {site.name}: {site_runs} runs")
    print(f"campaign_advice: {len(campaign_advice(campaign))} statements (every question)")
    print(f"results answer: {len(results_answer(campaign=campaign, cells=cells))} lines")
    print(f"site_advice: {len(site_advice(site))} statements")
    print("| what | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    figures = {
        "results answer (the questions the campaign asks)": timed(
            args.samples, lambda: results_answer(campaign=campaign, cells=cells)
        ),
        "campaign_advice, every question": timed(args.samples, lambda: campaign_advice(campaign)),
        "site_advice (4 endpoints)": timed(args.samples, lambda: site_advice(site)),
    }
    for what, ms in figures.items():
        print(f"| {what} | {ms['p50']:.0f} | {ms['p95']:.0f} | {ms['max']:.0f} |")


if __name__ == "__main__":
    main()
