"""Every verdict stores the windows it compared and the detail shows them: availability and
a blamed group the night their failures were counted on, not-run the span its runs waited,
launch-failed the slot that launched nothing (the metric, error-class and no-data verdicts'
windows are tested with their detectors)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
    api_for,
    page_for,
    user,
)
from tests.webapp.watch.nights import NIGHT_ONE, at, measure, night, run, series, watch
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.schedules import campaigns_launch_due
from webapp.sites.models import Endpoint
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.launches import launch_key
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db


def viewer() -> Client:
    return page_for(user("viewer", "viewer"))


def shown_windows(regression: Regression) -> tuple[str, str]:
    """The detail page's baseline and target windows, as words."""
    html = viewer().get(f"/regressions/{regression.pk}/").content.decode()
    return tuple(  # type: ignore[return-value]
        html.split(f'id="regression-{name}-window">')[1].split("</dd>")[0]
        for name in ("baseline", "target")
    )


def windows(regression: Regression) -> tuple[Any, Any]:
    return regression.detector["baseline_window"], regression.detector["target_window"]


def test_availability_counts_the_failures_of_the_night_it_judged() -> None:
    one = series()
    measure(one, 0, "ok")
    measure(one, 1, "auth", "auth")
    watch(1)
    regression = Regression.objects.get(key__endswith=":availability")
    assert regression.detector["name"] == "failures"
    assert windows(regression) == (None, ["2026-10-02", "2026-10-02"])
    assert shown_windows(regression) == ("—", "2026-10-02")

    measure(one, 2, "auth")
    watch(2)
    regression.refresh_from_db()
    assert windows(regression) == (None, ["2026-10-03", "2026-10-03"])


def test_a_blamed_group_counts_the_night_its_series_were_bad_on() -> None:
    endpoints = [EndpointFactory(site=SiteFactory()) for _ in range(4)]
    for endpoint in endpoints:
        run(series(endpoint=endpoint, vantage_point="remote"), night(0), status="timeout")
        run(series(endpoint=endpoint, vantage_point="local"), night(0), throughput_mbps=10.0)
    watch(0)
    group = Regression.objects.get(key="vp:remote:availability")
    assert group.detector["name"] == "blame"
    assert windows(group) == (None, ["2026-10-01", "2026-10-01"])
    assert shown_windows(group) == ("—", "2026-10-01")


def test_not_run_spans_the_wait_from_the_oldest_queued_run_to_the_pass() -> None:
    now = at(NIGHT_ONE, 6)
    run(
        series(vantage_point="remote"),
        NIGHT_ONE,
        status=Run.Status.QUEUED,
        created=now - timedelta(hours=3),
    )
    watch_evaluate(now=now)
    regression = Regression.objects.get(key="vp:remote:not-run")
    assert regression.detector["name"] == "not-run"
    assert regression.detector["parameters"] == {
        "not_run_after_s": 7200,
        "not_run_window_s": 86400,
    }
    assert windows(regression) == (
        None,
        ["2026-10-01T03:00:00+00:00", "2026-10-01T06:00:00+00:00"],
    )
    assert shown_windows(regression) == ("—", "2026-10-01 03:00 to 2026-10-01 06:00 UTC")
    api = api_for(user("reader", "viewer")).get(f"/api/v1/regressions/{regression.pk}/").json()
    assert api["series"]["windows"] == {
        "baseline": None,
        "target": ["2026-10-01T03:00:00+00:00", "2026-10-01T06:00:00+00:00"],
    }


def test_launch_failed_is_about_the_slot_that_launched_nothing() -> None:
    endpoint = TestFileFactory().endpoint
    campaign = CampaignFactory(
        name="nightly-reads",
        schedule="0 2 * * *",
        endpoints=[endpoint],
        vantage_points=[VantagePointFactory(name="windows-nobody")],
    )
    Campaign.objects.filter(pk=campaign.pk).update(created_at=datetime(2026, 3, 1, tzinfo=UTC))
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=False)
    campaigns_launch_due(now=datetime(2026, 3, 10, 2, 0, 30, tzinfo=UTC))
    watch_evaluate(now=datetime(2026, 3, 10, 2, 45, tzinfo=UTC))
    regression = Regression.objects.get(key=launch_key(campaign.pk))
    assert regression.detector["name"] == "launch-failed"
    slot = "2026-03-10T02:00:00+00:00"
    assert windows(regression) == (None, [slot, slot])
    assert shown_windows(regression) == ("—", "2026-03-10 02:00 UTC")

    campaigns_launch_due(now=datetime(2026, 3, 11, 2, 0, 30, tzinfo=UTC))
    watch_evaluate(now=datetime(2026, 3, 11, 2, 45, tzinfo=UTC))
    regression.refresh_from_db()
    later = "2026-03-11T02:00:00+00:00"
    assert windows(regression) == (None, [later, later])
