"""The dashboards' data on a year of nightly history (target: p95 under 300 ms per request).

    .venv/bin/python benches/dashboards_data.py [--section compare] [--samples 30]
        [--endpoints 100 --parameter-sets 10 --nights 365 --vantage-points 1]

Fills the benchmark database (benches/django_bench.py) once with the synthetic history of
`manage.py history synthesize` (100 endpoints x 10 parameter sets x 365 nights = 365,000
runs by default; made again only when its size differs), then times each section's API
requests through Django's full request stack (test client: URL routing, token
authentication, permissions, the form, the selector, JSON rendering), without an HTTP
server. A section is a function returning {label: URL}; add yours to SECTIONS.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import date, timedelta

from django_bench import percentiles_ms, setup_django

WARM_UP = 3


def ensure_history(
    *, endpoints: int, parameter_sets: int, nights: int, vantage_points: int
) -> None:
    """The synthetic history of this size, made (or made again) if it is not there."""
    from django.core.management import call_command

    from webapp.campaigns.models import Run
    from webapp.demo.synthetic import SYNTHETIC_PREFIX
    from webapp.sites.models import Endpoint, VantagePoint

    synthetic = {"name__startswith": SYNTHETIC_PREFIX}
    have = (
        Endpoint.objects.filter(**synthetic).count(),
        VantagePoint.objects.filter(**synthetic).count(),
        Run.objects.filter(campaign__name__startswith=SYNTHETIC_PREFIX).count(),
    )
    want = (endpoints, vantage_points, endpoints * parameter_sets * nights * vantage_points)
    if have == want:
        return
    print(f"synthesizing {want[2]:,} runs (have {have[2]:,}) ...")
    call_command(
        "history",
        "synthesize",
        f"--endpoints={endpoints}",
        f"--parameter-sets={parameter_sets}",
        f"--nights={nights}",
        f"--vantage-points={vantage_points}",
        "--clear",
    )


def compare_requests() -> dict[str, str]:
    """Compare over time: 1 to 20 endpoints (the cap), 90 days to a year."""
    from webapp.campaigns.models import Run
    from webapp.demo.synthetic import SYNTHETIC_PREFIX
    from webapp.sites.models import Endpoint, Site

    endpoints = list(
        Endpoint.objects.filter(name__startswith=SYNTHETIC_PREFIX)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    last = Run.objects.filter(campaign__name__startswith=SYNTHETIC_PREFIX).latest("created_at")
    until = last.created_at.date()
    year = f"since={until - timedelta(days=364)}&until={until}"
    month = f"since={until - timedelta(days=30)}&until={until}"
    site = Site.objects.filter(name__startswith=SYNTHETIC_PREFIX).order_by("pk").first()
    assert site is not None

    def ids(n: int) -> str:
        return "&".join(f"endpoint={pk}" for pk in endpoints[:n])

    named = "method=direct&pattern=random&read_size=4096&fraction=0.01&clients=1"
    return {
        "1 endpoint, 90 days (defaults)": f"?{ids(1)}&until={until}",
        "5 endpoints, a year": f"?{ids(5)}&{year}",
        "20 endpoints, a year": f"?{ids(20)}&{year}",
        "20 endpoints, a year, p99 latency, set named": (
            f"?{ids(20)}&{year}&metric=latency_p99_us&{named}"
        ),
        "20 endpoints, a year, per week": f"?{ids(20)}&{year}&bucket=week",
        "20 endpoints, 31 days with the runs": f"?{ids(20)}&{month}",
        "a site's root endpoints, a year": f"?site={site.pk}&protocol=root&{year}",
    }


def compare_urls() -> dict[str, str]:
    return {label: f"/api/v1/compare/{query}" for label, query in compare_requests().items()}


def matrix_urls() -> dict[str, str]:
    """The matrix: every endpoint x vantage point of the synthetic history, a year of nights
    behind each cell."""
    from webapp.sites.models import Site

    site = Site.objects.filter(name__startswith="synth-").order_by("pk").first()
    assert site is not None
    named = "method=direct&pattern=random&read_size=4096&fraction=0.01&clients=1"
    return {
        label: f"/api/v1/matrix/{query}"
        for label, query in {
            "defaults (the most common set)": "",
            "set named, p99 latency, boundaries": (
                f"?{named}&metric=latency_p99_us&good=2000&bad=10000"
            ),
            "site x protocol": "?view=site-protocol",
            "one site": f"?site={site.pk}",
        }.items()
    }


def alerts_urls() -> dict[str, str]:
    """Failing now and slower than the week before (the home page's data is the default)."""
    every = "&".join(
        f"metric={m}" for m in ("throughput_mbps", "wall_s", "open_s", "ttfb_s", "latency_p50_us")
    )
    return {
        label: f"/api/v1/alerts/{query}"
        for label, query in {
            "defaults (7 days; the home page's)": "",
            "30 days": "?days=30",
            "a year, five metrics": f"?days=365&{every}",
            "one parameter set": "?method=direct&pattern=random&read_size=4096&clients=1",
        }.items()
    }


SECTIONS: dict[str, Callable[[], dict[str, str]]] = {
    "compare": compare_urls,
    "matrix": matrix_urls,
    "alerts": alerts_urls,
}


def time_section(client: object, name: str, urls: dict[str, str], samples: int) -> list[float]:
    print(f"\n### {name}\n")
    print("| request | bytes | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|---|")
    every = []
    for label, url in urls.items():
        runs = []
        for i in range(samples + WARM_UP):
            start = time.perf_counter()
            response = client.get(url, SERVER_NAME="localhost")  # type: ignore[attr-defined]
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, (url, response.content[:300])
            if i >= WARM_UP:
                runs.append(elapsed)
        every += runs
        ms = percentiles_ms(runs)
        size = len(response.content)
        print(f"| {label} | {size:,} | {ms['p50']:.1f} | {ms['p95']:.1f} | {ms['max']:.1f} |")
    ms = percentiles_ms(every)
    print(f"\n{name}, all requests: p50 {ms['p50']:.1f} ms, p95 {ms['p95']:.1f} ms")
    return every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", action="append", choices=sorted(SECTIONS))
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--parameter-sets", type=int, default=10)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--vantage-points", type=int, default=1)
    args = parser.parse_args()
    setup_django()

    import os

    from django.contrib.auth.models import User
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.campaigns.models import Run

    ensure_history(
        endpoints=args.endpoints,
        parameter_sets=args.parameter_sets,
        nights=args.nights,
        vantage_points=args.vantage_points,
    )
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    print(f"{Run.objects.count():,} runs in the database; load average {os.getloadavg()}")
    print(f"on {date.today()}, {args.samples} samples per request after {WARM_UP} warm-up")
    for name in args.section or sorted(SECTIONS):
        time_section(client, name, SECTIONS[name](), args.samples)
    print(f"\nload average afterwards {os.getloadavg()}")


if __name__ == "__main__":
    main()
