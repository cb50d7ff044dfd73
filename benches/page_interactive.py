"""Dashboard pages in Chromium: time from navigation to the charts drawn (target: 1.5 s).

    .venv/bin/python benches/page_interactive.py --preset compare [--samples 10]
    .venv/bin/python benches/page_interactive.py "/compare/?endpoint=3&endpoint=4" \\
        "/matrix/|#matrix-card table" [--samples 10]

Each URL is a path on the web application, optionally followed by `|SELECTOR`: the page
counts as interactive once the document has loaded and SELECTOR is on the page (default:
every Plotly chart of the page has drawn its `.main-svg`); the time is the page's own
performance.now() at the first animation frame where that holds, i.e. from the start of the
navigation. Every sample is a fresh browser context (no cache), logged in as a viewer; with
--warm the page is opened once in it first and the second navigation is timed (the browser's
cache and V8's code cache warm, as for an operator who comes back to the page).

The pages are served by `manage.py runserver --insecure` (static files included) on a free
loopback port against the benchmark database (benches/django_bench.py); presets (PRESETS)
build URLs from what is in that database, e.g. `compare` from the synthetic history of
benches/dashboards_data.py (run it first). Add a preset for your page to PRESETS.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django_bench import ROOT, percentiles_ms, setup_django

CHROMIUM = "/usr/bin/chromium"
DEFAULT_SELECTOR = ""  # every .js-plotly-plot has its .main-svg
# True once the page is loaded and drawn; returns performance.now() (ms since navigation).
READY = """(selector) => {
  if (document.readyState !== "complete") return false;
  if (selector) return document.querySelector(selector) ? performance.now() : false;
  const plots = [...document.querySelectorAll(".js-plotly-plot")];
  if (!plots.length) return false;
  return plots.every((p) => p.querySelector(".main-svg")) ? performance.now() : false;
}"""


def compare_preset() -> list[str]:
    from dashboards_data import compare_requests

    requests = compare_requests()
    return [
        f"/compare/{requests['5 endpoints, a year']}",
        f"/compare/{requests['20 endpoints, a year']}",
        f"/compare/{requests['20 endpoints, 31 days with the runs']}",
    ]


def matrix_preset() -> list[str]:
    """The matrix is an HTML table: interactive once it is on the page."""
    table = "|#matrix-card table.matrix"
    return [
        f"/matrix/{table}",
        f"/matrix/?metric=wall_s&good=1&bad=10{table}",
        f"/matrix/?view=site-protocol{table}",
    ]


def home_preset() -> list[str]:
    """Home and alerts: tables, interactive once the last one is on the page."""
    return ["/|#running", "/alerts/|#slower-card", "/alerts/?days=365|#slower-card"]


def run_detail_preset() -> list[str]:
    """A real 256-client run (made the first time: benches/run_detail_page.py). Its timeline
    is drawn at once (below the first screen at 1280 x 900, which shows the run's facts),
    the charts below it once the page has loaded: the first URL waits for the timeline, the
    second for every chart."""
    from run_detail_page import bench_run

    page = f"/runs/{bench_run(256).pk}/"
    drawn = [f"#{card}-card[data-drawn]" for card in ("timeline", "latency", "served")]
    return [f"{page}|{drawn[0]}", f"{page}|{' ~ '.join(drawn)}"]


def campaign_results_preset() -> list[str]:
    """A campaign of 3,645 runs (made the first time: benches/campaign_results.py), as it
    opens and with other controls. Its charts are drawn as they come near the screen: at
    1280 x 900 the first screen shows one (time vs fraction); the next row is drawn next."""
    from campaign_results import bench_endpoint, seed

    page = f"/campaigns/{seed()}/results/"
    far = bench_endpoint("far").pk
    other = f"?endpoint={far}&pattern=random&read_size=4096&clients=16"
    return [
        f"{page}|#chart-fraction[data-drawn-for]",
        f"{page}{other}|#chart-fraction[data-drawn-for]",
        f"{page}|#chart-throughput[data-drawn-for]",
    ]


def run_list_preset() -> list[str]:
    """The runs list on the synthetic year (benches/run_list_year.py fills it): an HTML
    table, interactive once its last row is on the page."""
    table = "|table.runs-table tbody tr:last-child"
    return [
        f"/runs/{table}",
        f"/runs/?ordering=-wall_s{table}",
        f"/runs/?error_class=refused&ordering=throughput_mbps{table}",
    ]


PRESETS: dict[str, Callable[[], list[str]]] = {
    "compare": compare_preset,
    "matrix": matrix_preset,
    "home": home_preset,
    "run-detail": run_detail_preset,
    "campaign-results": campaign_results_preset,
    "run-list": run_list_preset,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def web_server() -> Iterator[str]:
    """runserver on a free port for the length of the benchmark, stopped by its pid."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--insecure"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(url)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def _wait_for(url: str) -> None:
    import urllib.request

    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def session_cookie() -> dict[str, str]:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from webapp.accounts.services import user_set_role

    user, _ = User.objects.get_or_create(username="bench-viewer")
    user_set_role(user=user, role="viewer")
    client = Client()
    client.force_login(user)
    return {
        "name": settings.SESSION_COOKIE_NAME,
        "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
    }


def measure(
    browser: Any, origin: str, cookie: dict[str, str], url: str, *, warm: bool = False
) -> float:
    path, _, selector = url.partition("|")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        context.add_cookies([{**cookie, "url": origin}])
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        for _ in range(2 if warm else 1):
            page.goto(f"{origin}{path}", wait_until="commit")
            ready = page.wait_for_function(READY, arg=selector, polling="raf", timeout=30_000)
        assert not errors, errors
        return float(ready.json_value()) / 1e3
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="*", help="PATH or PATH|SELECTOR")
    parser.add_argument("--preset", action="append", choices=sorted(PRESETS), default=[])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--warm", action="store_true", help="time a second visit")
    args = parser.parse_args()
    setup_django()
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop, Django's ORM
    from playwright.sync_api import sync_playwright

    urls = list(args.urls)
    for preset in args.preset:
        urls += PRESETS[preset]()
    if not urls:
        parser.error("give URLs or a --preset")
    cookie = session_cookie()
    print(f"load average {os.getloadavg()}; {args.samples} samples per page (+1 warm-up)")
    print("| page | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    with web_server() as origin, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        for url in urls:
            samples = [
                measure(browser, origin, cookie, url, warm=args.warm)
                for _ in range(args.samples + 1)
            ]
            ms = percentiles_ms(samples[1:])
            path = url.partition("|")[0]
            shown = path if len(path) < 70 else f"{path[:24]}...{path[-42:]}"
            print(f"| `{shown}` | {ms['p50']:.0f} | {ms['p95']:.0f} | {ms['max']:.0f} |")
        browser.close()
    print(f"load average afterwards {os.getloadavg()}")


if __name__ == "__main__":
    main()
