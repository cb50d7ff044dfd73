"""What a schedule costs: bytes read and run-minutes per night and per month, from its runs'
estimates, on the campaign (page and API) and on the site's page (its endpoints' runs only)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from tests.webapp.factories import (
    CampaignFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
    api_for,
    page_for,
    user,
)
from webapp.campaigns.estimates import campaign_cost, campaign_planned_runs, site_schedule_cost
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import TestFile

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
SUNDAY = datetime(2026, 3, 1, 12, tzinfo=UTC)


def took(test_file: TestFile, seconds: float, **params: object) -> None:
    """An earlier succeeded run of the factory's parameters that took `seconds`."""
    started = timezone.now() - timedelta(hours=1)
    RunFactory(
        test_file=test_file,
        vantage_point=VantagePointFactory(name="local"),
        status=Run.Status.SUCCEEDED,
        started_at=started,
        finished_at=started + timedelta(seconds=seconds),
        **params,
    )


def scheduled(test_files: list[TestFile], schedule: str, **fields: object) -> Campaign:
    return CampaignFactory(
        endpoints=[f.endpoint for f in test_files],
        vantage_points=[VantagePointFactory(name="local")],
        schedule=schedule,
        **fields,
    )


def test_a_nightly_schedule_costs_one_launch_a_night_and_thirty_a_month() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    took(test_file, 10, repetition=0)
    campaign = scheduled([test_file], "0 2 * * *", repetitions=2)
    launch_bytes = sum(plan.planned_bytes for plan in campaign_planned_runs(campaign=campaign))
    cost = campaign_cost(campaign=campaign, now=SUNDAY)
    assert (cost.launches_per_month, cost.launches_per_night) == (30, 1)
    assert (cost.bytes_per_night, cost.bytes_per_month) == (launch_bytes, 30 * launch_bytes)
    assert cost.run_minutes_per_night == pytest.approx(2 * 10 / 60)
    assert cost.run_minutes_per_month == pytest.approx(30 * 2 * 10 / 60)
    assert cost.unknown_runs == 0


def test_a_weekly_schedule_costs_its_mondays_and_a_paused_one_nothing() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    took(test_file, 60)
    campaign = scheduled([test_file], "0 6 * * 1")
    cost = campaign_cost(campaign=campaign, now=SUNDAY)  # Mondays 2, 9, 16, 23 and 30 March
    assert cost.launches_per_month == 5
    assert cost.run_minutes_per_month == pytest.approx(5)
    campaign.schedule_paused_at = SUNDAY
    assert campaign_cost(campaign=campaign, now=SUNDAY).to_json()["bytes_per_month"] == 0
    unscheduled = scheduled([test_file], "")
    assert campaign_cost(campaign=unscheduled, now=SUNDAY).launches_per_month == 0


def test_runs_with_no_estimate_make_the_run_minutes_a_lower_bound() -> None:
    campaign = scheduled([TestFileFactory()], "0 * * * *")
    cost = campaign_cost(campaign=campaign, now=SUNDAY)
    assert (cost.launches_per_month, cost.unknown_runs, cost.run_minutes_per_month) == (720, 1, 0)
    assert cost.bytes_per_month > 0


def test_a_site_s_cost_counts_the_running_schedules_runs_on_its_endpoints_only() -> None:
    here, elsewhere = TestFileFactory(size=16 * MiB), TestFileFactory(size=16 * MiB)
    took(here, 30)
    took(elsewhere, 600)
    both = scheduled([here, elsewhere], "0 2 * * *")
    scheduled([here], "0 */12 * * *")
    paused = scheduled([here], "0 3 * * *")
    Campaign.objects.filter(pk=paused.pk).update(schedule_paused_at=SUNDAY)
    scheduled([here], "")  # launched by hand: no schedule to cost
    cost = site_schedule_cost(site_id=here.endpoint.site_id, now=SUNDAY)
    assert cost.launches_per_month == 30 + 60
    assert cost.run_minutes_per_month == pytest.approx((30 + 60) * 30 / 60)
    one_run = campaign_planned_runs(campaign=both)[0].planned_bytes
    assert cost.bytes_per_month == (30 + 60) * one_run


def test_the_schedule_api_and_the_pages_show_the_cost() -> None:
    olga = user("olga")
    test_file = TestFileFactory(size=16 * MiB)
    took(test_file, 30)
    campaign = scheduled([test_file], "0 2 * * *", owner=olga)
    body = api_for(olga).get(f"/api/v1/campaigns/{campaign.pk}/schedule/").json()
    assert body["cost"]["launches_per_month"] == 30
    assert body["cost"]["run_minutes_per_night"] == pytest.approx(0.5)
    assert set(body["cost"]) == {
        "launches_per_night",
        "launches_per_month",
        "bytes_per_night",
        "bytes_per_month",
        "run_minutes_per_night",
        "run_minutes_per_month",
        "unknown_runs",
    }
    page = page_for(olga).get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "What the schedule costs" in page
    assert '<span class="cost-minutes-night">0.5</span>' in page
    site_page = page_for(olga).get(f"/sites/{test_file.endpoint.site_id}/").content.decode()
    assert "What its schedules cost" in site_page
    assert '<span class="cost-minutes-month">15.0</span>' in site_page
