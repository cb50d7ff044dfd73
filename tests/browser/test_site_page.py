"""The site page in Chromium on a synthetic site with 60 nights of history: the summary
draws its availability strips (each cell's percentage agrees with the runs in the database,
and is coloured by its rating), its key figures and recent failures, above the endpoints;
its links open compare (with the site's endpoints drawn) and the matrix (the site's rows),
and a failure's run. A hostile endpoint name stays text."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from tests.webapp.dashboards.status_runs import RunMaker, night
from tests.webapp.factories import SiteFactory, VantagePointFactory
from webapp.campaigns.models import Run
from webapp.demo.synthetic import SYNTHETIC_PREFIX, history_synthesize
from webapp.sites.models import Endpoint, Site

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)>"
RATING_COLOURS = {  # static/css/status.css
    "good": "rgb(212, 232, 245)",
    "warn": "rgb(250, 242, 184)",
    "bad": "rgb(247, 211, 189)",
}


def synthetic_site() -> Site:
    """One synthetic site (four endpoints, one per protocol), 60 nights up to yesterday,
    two parameter sets, three runs a night; and a failure of today on its root endpoint."""
    history_synthesize(
        endpoints=4,
        parameter_sets=2,
        nights=60,
        repetitions=3,
        seed=7,
        last_night=timezone.now().date() - timedelta(days=1),
    )
    site = Site.objects.get(name__startswith=SYNTHETIC_PREFIX)
    root = site.endpoints.get(protocol="root")
    make = RunMaker()
    make.files[root.pk] = root.default_file
    make.add(
        root,
        VantagePointFactory(name="ral"),
        Run.Status.FAILED,
        timezone.now() - timedelta(minutes=5),
        errors=[{"class": "auth", "message": "token expired\nscope storage.read:/", "client": 0}],
    )
    return site


def expected_cell(endpoint: Endpoint, day: date) -> str:
    """The day's availability as the page writes it, from the runs in the database."""
    runs = Run.objects.filter(endpoint=endpoint, created_at__date=day)
    statuses = list(runs.values_list("status", flat=True))
    ended = [s for s in statuses if s in ("succeeded", "partial", "failed", "timeout")]
    if not ended:
        return "—"
    share = (ended.count("succeeded") + ended.count("partial") / 2) / len(ended)
    return f"{math.floor(share * 100 + 1e-9)}%"


def strip_row(page: Any, strip: str, name: str) -> Any:
    rows = page.locator(f"#{strip} tbody tr")
    return rows.filter(has=page.locator("th", has_text=re.compile(f"^{re.escape(name)}$")))


def test_the_site_page_summarises_and_links_to_compare_and_the_matrix(
    browser_page: Callable[..., Any], live_server: Any, screenshot: Callable[..., Any]
) -> None:
    site = synthetic_site()
    endpoints = list(site.endpoints.order_by("protocol", "name"))
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/sites/{site.pk}/")
    page.wait_for_selector("#availability-days td.avail")
    screenshot(page, "site-page")

    # The strips: one row per endpoint and the whole site, 14 days and 8 weeks.
    assert page.locator("#availability-days tbody tr").count() == len(endpoints) + 1
    assert page.locator("#availability-weeks tbody tr").count() == len(endpoints) + 1
    today = timezone.now().date()
    for endpoint in endpoints:
        cells = strip_row(page, "availability-days", endpoint.name).locator("td.avail")
        assert cells.count() == 14
        texts = cells.all_inner_texts()
        for n, text in enumerate(texts):
            assert text == expected_cell(endpoint, today - timedelta(days=13 - n)), (endpoint, n)
    # Coloured by rating, as drawn (and written: the percentage is the cell's text).
    for rating, colour in RATING_COLOURS.items():
        drawn = page.locator(f"#availability-days td.avail.rating-{rating}")
        if drawn.count():
            assert drawn.first.evaluate("c => getComputedStyle(c).backgroundColor") == colour
    assert page.locator("#availability-days td.avail.rating-good").count() > 0

    # Key figures of every endpoint, the failure rate, today's failure first.
    latest = page.locator("#site-latest tbody tr")
    assert latest.count() == len(endpoints)
    assert all("MB/s" in text for text in latest.locator("td:nth-child(3)").all_inner_texts())
    assert page.locator("#site-failure-rate").inner_text().endswith("%")
    first_failure = page.locator("#site-failures tbody tr").first
    assert "auth" in first_failure.inner_text() and "token expired" in first_failure.inner_text()
    assert "scope storage" not in first_failure.inner_text()  # the first line only
    # The endpoint management content is still there, below.
    assert page.locator("h2", has_text="Endpoints").count() == 1

    # Compare: the site's endpoints, drawn.
    page.locator("#site-compare").click()
    page.wait_for_url("**/compare/?*")
    assert parse_qs(urlsplit(page.url).query)["site"] == [str(site.pk)]
    page.wait_for_selector("#compare-chart .main-svg")
    names = page.evaluate(
        "[...new Set(document.getElementById('compare-chart').data"
        ".filter(t => t.legendgroup).map(t => t.legendgroup))]"
    )
    assert len(names) == len(endpoints)

    # The matrix: the site's rows only.
    page.go_back()
    page.locator("#site-matrix").click()
    page.wait_for_url("**/matrix/?*")
    page.wait_for_selector("table.matrix")
    rows = page.locator("table.matrix tbody th[scope=row]").all_inner_texts()
    assert len(rows) == len(endpoints)
    assert all(site.name in row for row in rows)

    # A failure's run.
    page.go_back()
    page.locator("#site-failures tbody tr").first.locator("a").click()
    page.wait_for_url("**/runs/*/")
    assert "auth" in page.content()
    watch.assert_clean()


def test_a_hostile_endpoint_name_is_text(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    make = RunMaker()
    endpoint = make.endpoint(HOSTILE, site=SiteFactory(name=HOSTILE))
    make.add(
        endpoint,
        VantagePointFactory(name="cern"),
        Run.Status.FAILED,
        night(1),
        errors=[{"class": "refused", "message": HOSTILE, "client": 0}],
    )
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/sites/{endpoint.site_id}/")
    page.wait_for_selector("#availability-days td.avail")
    assert strip_row(page, "availability-days", HOSTILE).count() == 1
    assert page.locator("img[src=x]").count() == 0
    assert HOSTILE in page.locator("#site-failures").inner_text()
    watch.assert_clean()
