"""The compare page in Chromium: lab runs measured in this process today, with synthetic
nightly history of other endpoints for the time axis."""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from tests.webapp.factories import CampaignFactory, RunFactory
from webapp.campaigns.models import Run
from webapp.campaigns.services import run_execute
from webapp.demo.services import lab_register
from webapp.demo.synthetic import PARAMETER_SETS, SYNTHETIC_PREFIX, history_synthesize
from webapp.sites.models import Endpoint, Site
from workers.lab.files import MiB

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)>"
METHOD, PATTERN, READ_SIZE, FRACTION, CLIENTS = PARAMETER_SETS[1]  # direct random 4 KiB
SET_QUERY = (
    f"method={METHOD}&pattern={PATTERN}&read_size={READ_SIZE}&fraction={FRACTION}&clients={CLIENTS}"
)
NIGHTS = 60
CHART = "document.getElementById('compare-chart')"
MEDIAN_TRACES = "t => t.legendgroup && t.name !== 'q1' && t.name !== 'q3' && t.mode !== 'markers'"


def lab_runs(lab: Any) -> list[Endpoint]:
    """Two runs of the parameter set on each of the near and far xrootd, measured now."""
    lab_register(lab=lab)
    endpoints = [Endpoint.objects.get(name=f"{n}-root") for n in ("near", "far")]
    campaign = CampaignFactory(name="lab compare", endpoints=endpoints)
    for endpoint in endpoints:
        for _ in range(2):
            run = RunFactory(
                campaign=campaign,
                test_file=endpoint.files.get(size=1 * MiB),
                method=METHOD,
                pattern=PATTERN,
                read_size=READ_SIZE,
                fraction=FRACTION,
                clients=CLIENTS,
            )
            run_execute(run_id=run.pk, worker="browser-test")
    assert Run.objects.filter(campaign=campaign, status="succeeded").count() == 4
    return endpoints


def history() -> Site:
    """60 nights up to yesterday, three runs a night, on one synthetic site (four endpoints,
    one per protocol)."""
    history_synthesize(
        endpoints=4,
        parameter_sets=2,
        nights=NIGHTS,
        repetitions=3,
        seed=5,
        last_night=timezone.now().date() - timedelta(days=1),
    )
    return Site.objects.get(name__startswith=SYNTHETIC_PREFIX)


def compare_url(live_server: Any, endpoints: list[Endpoint], site: Site, days: int) -> str:
    today = timezone.now().date()
    ids = "&".join(f"endpoint={e.pk}" for e in endpoints)
    since = today - timedelta(days=days - 1)
    return f"{live_server.url}/compare/?{ids}&site={site.pk}&{SET_QUERY}&since={since}"


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#compare-chart .main-svg")


def medians(page: Any) -> dict[str, dict[str, float]]:
    """{line name: {day: median}} as drawn."""
    traces = page.evaluate(
        f"""document.getElementById('compare-chart').data.filter({MEDIAN_TRACES})
            .map(t => ({{name: t.name, x: Array.from(t.x), y: Array.from(t.y)}}))"""
    )
    return {t["name"]: dict(zip(t["x"], t["y"], strict=True)) for t in traces}


def measured(endpoint: Endpoint, since: date, metric: str = "throughput_mbps") -> list[Run]:
    return list(
        Run.objects.filter(
            endpoint=endpoint,
            status__in=["succeeded", "partial"],
            method=METHOD,
            pattern=PATTERN,
            created_at__date__gte=since,
        ).exclude(**{f"{metric}__isnull": True})
    )


def daily_medians(endpoint: Endpoint, since: date, metric: str) -> dict[str, float]:
    days: dict[str, list[float]] = {}
    for run in measured(endpoint, since, metric):
        days.setdefault(run.created_at.date().isoformat(), []).append(getattr(run, metric))
    return {day: statistics.median(values) for day, values in days.items()}


def assert_drawn(drawn: dict[str, float], expected: dict[str, float]) -> None:
    assert set(drawn) == set(expected)
    for day, value in expected.items():
        assert drawn[day] == pytest.approx(value, rel=1e-5)


def download(page: Any, card: str, kind: str = "csv") -> str:
    with page.expect_download() as caught:
        page.locator(f"#{card} > .chart-tools > [data-download={kind}]").click()
    with open(caught.value.path(), encoding="utf-8") as handle:
        return handle.read()


def test_compare_page_draws_lab_runs_and_history(
    browser_page: Callable[..., Any], live_server: Any, lab: Any
) -> None:
    near, far = lab_runs(lab)
    site = history()
    synthetic = list(site.endpoints.order_by("name"))
    today = timezone.now().date()
    since = today - timedelta(days=NIGHTS - 1)
    page, watch = browser_page("viewer")
    open_page(page, compare_url(live_server, [near, far], site, NIGHTS))

    drawn = medians(page)
    names = {f"{e.name} ({e.protocol})" for e in [near, far, *synthetic]}
    assert set(drawn) == names
    for endpoint in [near, far, *synthetic]:
        expected = daily_medians(endpoint, since, "throughput_mbps")
        assert_drawn(drawn[f"{endpoint.name} ({endpoint.protocol})"], expected)
    assert list(drawn[f"{near.name} (root)"]) == [today.isoformat()]  # measured just now
    summary = page.locator("#compare-summary").inner_text()
    total = sum(len(measured(e, since)) for e in [near, far, *synthetic])
    assert f"of {total} measured runs" in summary
    assert "per day" in summary

    # Failures: one marker per endpoint, day and status, on their own strip.
    failures = Run.objects.filter(
        endpoint__in=synthetic, status__in=["failed", "timeout"], method=METHOD, pattern=PATTERN
    )
    expected_marks = {
        (f"{r.endpoint.name} ({r.endpoint.protocol})", r.created_at.date().isoformat(), r.status)
        for r in failures
    }
    marks = page.evaluate(
        """document.getElementById('failures-chart').data.flatMap(t =>
            Array.from(t.x).map((x, i) => [t.y[i], x, t.name]))"""
    )
    labels = {"failed": "failed", "timeout": "timed out"}
    assert {(y, x, name) for y, x, name in marks} == {
        (y, x, labels[s]) for y, x, s in expected_marks
    }

    # Zooming the metric moves the failure strip with it.
    zoom = [str(today - timedelta(days=20)), str(today - timedelta(days=10))]
    page.evaluate(
        f"Plotly.relayout(document.getElementById('compare-chart'), {{'xaxis.range': {zoom}}})"
    )
    page.wait_for_function(
        "() => document.getElementById('failures-chart').layout.xaxis.range[0]"
        f".startsWith('{zoom[0]}')"
    )
    watch.assert_clean()


def test_months_of_history_read_at_a_glance_and_zoom_together(
    browser_page: Callable[..., Any], live_server: Any, screenshot: Callable[[Any, str], Any]
) -> None:
    today = timezone.now().date()
    history_synthesize(
        endpoints=24,
        parameter_sets=1,
        nights=120,
        repetitions=3,
        seed=32,  # two of the six root endpoints get slower: one for good, one for weeks
        last_night=today - timedelta(days=1),
    )
    roots = Endpoint.objects.filter(name__startswith=SYNTHETIC_PREFIX, protocol="root")
    ids = "&".join(f"endpoint={e.pk}" for e in roots.order_by("name"))
    page, watch = browser_page("viewer")
    open_page(page, f"{live_server.url}/compare/?{ids}&since={today - timedelta(days=119)}")
    drawn = medians(page)
    assert len(drawn) == roots.count() == 6
    assert all(len(days) > 100 for days in drawn.values())
    bands = "document.getElementById('compare-chart').data.filter(t => t.fill === 'tonexty')"
    assert page.evaluate(f"{bands}.length") == 6
    page.wait_for_selector("#failures-chart .main-svg")
    page.check("#id_scale")  # a display choice: no request, the address keeps it
    page.wait_for_function(
        "() => document.getElementById('compare-chart').layout.yaxis.type === 'log'"
    )
    assert parse_qs(urlsplit(page.url).query)["scale"] == ["log"]
    assert medians(page) == drawn
    # Each tick says its value in full: Plotly's own labels read 200 as "2" and 30 MB/s as
    # "3", values outside the axis.
    low, high = (10**end for end in page.evaluate(f"{CHART}.layout.yaxis.range"))
    ticks = page.evaluate(
        "Array.from(document.querySelectorAll('#compare-chart .ytick text'), t => t.textContent)"
    )
    assert len(ticks) >= 3
    assert all(low <= float(tick.replace(",", "")) <= high for tick in ticks), (ticks, low, high)
    screenshot(page, "compare")

    # The range selector's "1 m" shows the last month in both charts.
    page.locator("#compare-chart .rangeselector .button", has_text="1 m").click()
    page.wait_for_function(
        """(() => {
            const range = document.getElementById('failures-chart').layout.xaxis.range;
            const days = (new Date(range[1]) - new Date(range[0])) / 86400e3;
            return days > 27 && days < 32;
        })()"""
    )
    watch.assert_clean()


def test_a_control_changes_the_plot_the_address_and_the_download(
    browser_page: Callable[..., Any], live_server: Any, lab: Any
) -> None:
    near, far = lab_runs(lab)
    site = history()
    since = timezone.now().date() - timedelta(days=29)
    page, watch = browser_page("viewer")
    open_page(page, compare_url(live_server, [near, far], site, 30))
    runs_drawn = page.evaluate(
        """document.getElementById('compare-chart').data.filter(t => t.mode === 'markers')
            .reduce((n, t) => n + t.x.length, 0)"""
    )
    endpoints = [near, far, *site.endpoints.all()]
    assert runs_drawn == sum(len(measured(e, since)) for e in endpoints)

    page.select_option("#id_metric", "open_s")
    page.wait_for_function(
        "() => document.getElementById('compare-chart').layout.yaxis.title.text"
        ".startsWith('Open time')"
    )
    assert parse_qs(urlsplit(page.url).query)["metric"] == ["open_s"]
    drawn = medians(page)
    assert_drawn(drawn[f"{near.name} (root)"], daily_medians(near, since, "open_s"))
    assert page.locator("#compare-title").inner_text() == "Open time (p50 over clients) (s)"

    rows = list(csv.DictReader(io.StringIO(download(page, "compare-card"))))
    from_csv: dict[str, dict[str, float]] = {}
    for row in rows:
        assert row["metric"] == "open_s"
        assert (row["bucket"], row["unit"]) == ("day", "s")
        from_csv.setdefault(f"{row['endpoint']} ({row['protocol']})", {})[row["day"]] = float(
            row["median"]
        )
    assert from_csv == drawn

    # The address opens the same view.
    again, _ = browser_page("viewer")
    open_page(again, page.url)
    assert again.locator("#id_metric").input_value() == "open_s"
    assert medians(again) == drawn
    watch.assert_clean()


def test_a_hostile_site_name_is_text_in_the_form_and_the_hovers(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    history_synthesize(endpoints=2, parameter_sets=2, nights=5, last_night=date(2026, 3, 1))
    site = Site.objects.get(name__startswith=SYNTHETIC_PREFIX)
    Site.objects.filter(pk=site.pk).update(name=HOSTILE)
    page, watch = browser_page("viewer")
    open_page(page, f"{live_server.url}/compare/?site={site.pk}&since=2026-02-20&until=2026-03-01")
    assert page.locator("#id_site option").filter(has_text=HOSTILE).count() == 1
    hover = page.evaluate(
        """(() => {
            const gd = document.getElementById('compare-chart');
            const line = gd.data.findIndex(t => t.meta && t.mode !== 'markers');
            Plotly.Fx.hover(gd, [{curveNumber: line, pointNumber: 0}]);
            return gd.querySelector('.hoverlayer').textContent;
        })()"""
    )
    assert HOSTILE in hover
    assert page.locator("img[src=x]").count() == 0
    watch.assert_clean()


def test_empty_states_say_what_to_do(browser_page: Callable[..., Any], live_server: Any) -> None:
    history_synthesize(endpoints=1, parameter_sets=1, nights=3, last_night=date(2026, 3, 1))
    endpoint = Endpoint.objects.get(name__startswith=SYNTHETIC_PREFIX)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/compare/")
    assert page.locator("#compare-chart .chart-message").inner_text().startswith("Pick endpoints")

    named = f"{live_server.url}/compare/?endpoint={endpoint.pk}&until=2026-03-01"
    page.goto(f"{named}&{SET_QUERY.replace('clients=1', 'clients=64')}")
    message = page.locator("#compare-chart .chart-message").inner_text()
    assert "No run of direct · random · 4 KiB reads · fraction 0.01 · 64 clients" in message
    assert "pick another parameter set" in message

    page.goto(f"{named}&clients=64")
    message = page.locator("#compare-chart .chart-message").inner_text()
    assert "None of the 1 parameter set these endpoints measured" in message

    page.goto(f"{live_server.url}/compare/?endpoint={endpoint.pk}&until=2025-03-01")
    assert "measured nothing" in page.locator("#compare-chart .chart-message").inner_text()

    # A bad control is named, nothing is drawn, and the address keeps what was asked.
    page.goto(f"{live_server.url}/compare/?endpoint={endpoint.pk}&until=2026-03-01")
    page.wait_for_selector("#compare-chart .main-svg")
    page.fill("#id_since", "2026-03-05")  # fires "change": the page asks the API
    page.wait_for_selector("[data-field=since] p.error")
    assert (
        page.locator("[data-field=since] p.error").inner_text() == "since: must not be after until"
    )
    assert "fix since" in page.locator("#compare-chart .chart-message").inner_text()
    # Chromium logs the API's 400 as a failed resource: that one was asked for.
    assert watch.errors == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]
    watch.errors.clear()
    watch.assert_clean()
