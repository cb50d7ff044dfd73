"""The campaign page's buttons in Chromium: Launch is off, and says why, when every endpoint
of the campaign is disabled; Cancel asks first, with the count, before anything is cancelled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import CampaignFactory, TestFileFactory, VantagePointFactory
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch
from webapp.sites.services import endpoint_set_enabled

pytestmark = pytest.mark.django_db(transaction=True)


def test_launch_is_off_and_says_why_when_every_endpoint_is_disabled(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    endpoint = TestFileFactory().endpoint
    endpoint_set_enabled(endpoint=endpoint, enabled=False)
    campaign = CampaignFactory(endpoints=[endpoint])
    page, watch = browser_page("admin")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    assert page.get_by_role("button", name="Launch 0 runs").is_disabled()
    assert page.locator("#launch-refusal").inner_text() == (
        "Launch is off: its endpoints are all disabled (a disabled endpoint is not read): "
        "enable one, or edit the campaign to choose others."
    )
    watch.assert_clean()


def test_cancel_asks_first_with_the_count(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    # No worker listens on "nowhere": the runs stay queued.
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint], clients=[1, 2, 3])
    campaign.vantage_points.set([VantagePointFactory(name="nowhere")])
    campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    page, watch = browser_page("admin")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    confirm = page.get_by_role("button", name="Yes, cancel 3 queued or running runs")
    assert not confirm.is_visible()
    page.get_by_text("Cancel 3 queued or running runs…").click()
    assert "Cancel all 3?" in page.inner_text("#cancel-runs")
    assert set(campaign.runs.values_list("status", flat=True)) == {"queued"}  # only asked
    confirm.click()
    page.wait_for_selector(".messages")
    assert "3 queued runs cancelled" in page.inner_text(".messages")
    assert set(campaign.runs.values_list("status", flat=True)) == {"cancelled"}
    watch.assert_clean()
