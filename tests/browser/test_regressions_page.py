"""The regression pages in Chromium: the list filtered, the detail with its plot (the
change night and the band marked), and an operator acknowledging with a note and silencing
until a date, then what the page shows. Names are hostile: they must stay text."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import (
    EndpointFactory,
    RegressionFactory,
    SeriesNightFactory,
    SiteFactory,
    VantagePointFactory,
)
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)>"
State = Regression.State


def _regression_with_series() -> Regression:
    """An open 40% throughput drop on 2026-11-20 with 24 nights of its series and 5 of
    another vantage point's view of the same endpoint and parameter set."""
    endpoint = EndpointFactory(site=SiteFactory(name=HOSTILE), name=f"door {HOSTILE}")
    regression = RegressionFactory(
        endpoint=endpoint,
        severity="critical",
        versions=[
            {"kind": "server", "version": "5.6.2", "first_seen": "2026-11-20", "previous": "5.6.1"}
        ],
    )
    other = VantagePointFactory(name="desy")
    for day in range(1, 25):
        median = 100.0 + day % 3 if day < 20 else 60.0
        metrics = {"throughput_mbps": {"median": median, "q1": median - 3, "q3": median + 3}}
        SeriesNightFactory(
            endpoint=endpoint,
            vantage_point=regression.vantage_point,
            night=date(2026, 11, day),
            metrics=metrics,
        )
        if day >= 20:
            SeriesNightFactory(endpoint=endpoint, vantage_point=other, night=date(2026, 11, day))
    return regression


def test_the_list_filtered_by_verdict_keeps_the_filter_in_the_address(
    browser_page: Callable[[str], tuple[Any, Any]], live_server: Any
) -> None:
    critical = _regression_with_series()
    suspicious = RegressionFactory(state=State.PENDING, verdict="suspicious", severity="warning")
    RegressionFactory(state=State.RESOLVED)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/regressions/")
    rows = page.locator("#regressions tbody tr[data-regression-id]")
    assert rows.evaluate_all("rs => rs.map(r => +r.dataset.regressionId)") == [
        critical.pk,
        suspicious.pk,
    ]
    assert HOSTILE in rows.first.inner_text()  # the name shown as text
    page.select_option("#id_verdict", "suspicious")
    page.click("#regressions-form button[type=submit]")
    page.wait_for_url("**verdict=suspicious**")
    assert rows.evaluate_all("rs => rs.map(r => +r.dataset.regressionId)") == [suspicious.pk]
    assert page.inner_text("#regressions-count") == "1 regression."
    watch.assert_clean()


def test_the_detail_plots_the_series_with_the_change_night_and_the_band(
    browser_page: Callable[[str], tuple[Any, Any]], live_server: Any
) -> None:
    regression = _regression_with_series()
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/regressions/{regression.pk}/")
    page.wait_for_selector("#regression-plot .main-svg")
    plot = page.evaluate(
        """() => {
          const p = document.getElementById('regression-plot');
          return {
            traces: p.data.map(t => [t.name, t.x.length]),
            shapes: p.layout.shapes.map(s => [s.type, s.yref, s.x0, s.y0]),
            annotations: p.layout.annotations.map(a => a.text),
          };
        }"""
    )
    assert plot["traces"][0][1] == 24 and plot["traces"][1] == ["desy", 5]
    band = [s for s in plot["shapes"] if s[0] == "rect" and s[1] == "y"]
    assert len(band) == 1 and band[0][3] < 100.0  # the baseline's band, drawn over the nights
    change = [s for s in plot["shapes"] if s[0] == "line" and s[1] == "paper"]
    assert change[0][2] == "2026-11-20"
    assert "change 2026-11-20" in plot["annotations"] and "server 5.6.2" in plot["annotations"]
    assert "e-divisive" in page.inner_text("#regression-detector")
    assert "Acknowledge" not in page.content()  # a viewer gets no forms
    watch.assert_clean()


def test_an_operator_acknowledges_with_a_note_then_silences_until_a_date(
    browser_page: Callable[[str], tuple[Any, Any]], live_server: Any
) -> None:
    regression = _regression_with_series()
    page, watch = browser_page("operator")
    page.goto(f"{live_server.url}/regressions/{regression.pk}/")
    page.fill("#id_ack-note", f"GGUS 4242 {HOSTILE}")
    page.click("#ack-form button[type=submit]")
    page.wait_for_selector("#regression-ack")
    assert page.inner_text("#regression-state") == "acknowledged"
    assert f"GGUS 4242 {HOSTILE}" in page.inner_text("#regression-ack")
    assert "Acknowledge" not in page.inner_text("#regression-actions")  # done: gone
    until = (timezone.now() + timedelta(days=3)).replace(second=0, microsecond=0)
    page.fill("#id_silence-until", until.strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_silence-note", "downtime announced in GOCDB")
    page.click("#silence-form button[type=submit]")
    page.wait_for_selector("#regression-silenced")
    assert page.inner_text("#regression-silenced") == f"silenced until {until:%Y-%m-%d %H:%M} UTC"
    events = page.inner_text("#regression-events tbody")
    assert "open → acknowledged" in events and "GGUS 4242" in events
    stored = Regression.objects.get(pk=regression.pk)
    assert (stored.silenced_until, stored.silence_note) == (until, "downtime announced in GOCDB")
    watch.assert_clean()
