"""The site page on a year of nightly history: its data (target: p95 under 300 ms) and the
page in Chromium (target: interactive within 1.5 s).

    .venv/bin/python benches/site_summary.py [--samples 30] [--page-samples 10]
        [--vantage-points 1] [--no-page] [--sqlite VAR_DIR]

Fills the benchmark database (benches/django_bench.py) with the synthetic year of
benches/dashboards_data.py (100 endpoints on 25 sites, 10 parameter sets, 365 nights; made
only when missing or of another size), then times, through Django's full request stack
(test client, token authentication), GET /api/v1/sites/{id}/summary/ and the site page's
HTML for a T1, a T2 and a T3 site; then the page in Chromium through runserver, from
navigation until its last strip (the weekly one) is on the page (benches/page_interactive.py).
"""

from __future__ import annotations

import argparse
import os
from datetime import date

from dashboards_data import ensure_history, time_section
from django_bench import percentiles_ms, setup_django

# The strip per week is the last table of the summary drawn; the endpoints follow it.
READY = "#availability-weeks tr.site-row td.avail:last-child"


def bench_sites() -> dict[str, int]:
    """One synthetic site of each tier (synth-t1-..., synth-t2-..., synth-t3-...)."""
    from webapp.sites.models import Site

    sites = {}
    for tier in ("t1", "t2", "t3"):
        site = Site.objects.filter(name__startswith=f"synth-{tier}-").order_by("pk").first()
        if site is not None:
            sites[tier.upper()] = site.pk
    assert sites, "no synthetic sites: is the history there?"
    return sites


def data_urls(sites: dict[str, int]) -> dict[str, str]:
    api = {f"API, a {tier} site": f"/api/v1/sites/{pk}/summary/" for tier, pk in sites.items()}
    page = {f"page HTML, a {tier} site": f"/sites/{pk}/" for tier, pk in sites.items()}
    return api | page


def time_pages(sites: dict[str, int], samples: int) -> None:
    from page_interactive import CHROMIUM, measure, session_cookie, web_server
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop, Django's ORM
    cookie = session_cookie()
    print(f"\n### the page in Chromium, cold ({samples} samples + 1 warm-up)\n")
    print("| page | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    with web_server() as origin, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        for tier, pk in sites.items():
            url = f"/sites/{pk}/|{READY}"
            times = [measure(browser, origin, cookie, url) for _ in range(samples + 1)]
            ms = percentiles_ms(times[1:])
            figures = " | ".join(f"{ms[k]:.0f}" for k in ("p50", "p95", "max"))
            print(f"| `/sites/{pk}/` ({tier}) | {figures} |")
        browser.close()


def setup_sqlite(var_dir: str) -> None:
    """Django on the embedded SQLite database of VAR_DIR (migrated); runserver inherits it."""
    import sys

    from django_bench import ROOT

    os.environ.update(
        DATABASE_URL="", FEDPROBE_VAR_DIR=var_dir, DJANGO_SETTINGS_MODULE="webapp.settings"
    )
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--page-samples", type=int, default=10)
    parser.add_argument("--vantage-points", type=int, default=1)
    parser.add_argument("--no-page", action="store_true", help="time the data only")
    parser.add_argument(
        "--sqlite",
        metavar="VAR_DIR",
        help="the embedded SQLite database in VAR_DIR instead of PostgreSQL",
    )
    args = parser.parse_args()
    if args.sqlite:
        setup_sqlite(args.sqlite)
    else:
        setup_django()

    from django.contrib.auth.models import User
    from django.test import Client

    from webapp.accounts.services import api_token_rotate, user_set_role
    from webapp.campaigns.models import Run

    ensure_history(endpoints=100, parameter_sets=10, nights=365, vantage_points=args.vantage_points)
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    client.force_login(user)  # the page's HTML needs the session; the API takes the token
    print(f"{Run.objects.count():,} runs in the database; load average {os.getloadavg()}")
    print(f"on {date.today()}, {args.samples} samples per request")
    sites = bench_sites()
    time_section(client, "site summary", data_urls(sites), args.samples)
    if not args.no_page:
        time_pages(sites, args.page_samples)
    print(f"\nload average afterwards {os.getloadavg()}")


if __name__ == "__main__":
    main()
