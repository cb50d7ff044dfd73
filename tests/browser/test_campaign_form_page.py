"""The new-campaign form in Chromium: a newcomer fills in only the basic fields (the advanced
ones are folded away, with their defaults), previews runs, bytes and duration, saves, and
launches; a second launch asks first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import TestFileFactory, VantagePointFactory
from webapp.campaigns.models import Campaign

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_campaign_made_with_only_the_basic_fields_previews_saves_and_launches(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    # A vantage point no worker listens on: the runs stay queued (a worker of the test
    # session on "local" would take them and fail them on the factory's endpoint).
    VantagePointFactory(name="local")
    nowhere = VantagePointFactory(name="nowhere")
    endpoint = TestFileFactory(size=16 * 1024 * 1024).endpoint
    page, watch = browser_page("operator")
    page.goto(f"{live_server.url}/campaigns/new/")
    assert not page.locator("#id_depth").is_visible()  # folded away
    page.fill("#id_name", "first campaign")
    page.select_option("#id_endpoints", str(endpoint.pk))
    page.fill("#id_methods", "direct")
    page.fill("#id_patterns", "random, sequential")
    page.fill("#id_read_sizes", "64k")
    page.fill("#id_fractions", "0.1")
    page.fill("#id_clients", "1")
    page.select_option("#id_vantage_points", str(nowhere.pk))

    page.get_by_role("button", name="Preview").click()
    page.wait_for_selector("#preview")
    assert page.locator(".preview-runs").inner_text() == "2"
    assert page.locator(".preview-duration").inner_text() == "unknown: no earlier runs"
    assert not Campaign.objects.exists()

    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"{live_server.url}/campaigns/*/")
    campaign = Campaign.objects.get(name="first campaign")
    assert (campaign.depth, campaign.vector_size, campaign.repetitions) == (64, 256, 1)

    page.get_by_role("button", name="Launch 2 runs").click()
    page.wait_for_url(f"{live_server.url}/runs/*")
    assert campaign.runs.count() == 2
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    assert "2 runs of this campaign are still queued or running" in page.inner_text("main")
    page.get_by_role("button", name="Launch 2 runs again…").click()
    page.get_by_role("button", name="Launch again").wait_for(state="visible", timeout=10_000)
    assert campaign.runs.count() == 2  # asked, not launched
    watch.assert_clean()


def test_the_parameter_lists_come_filled_with_the_engine_defaults_and_preview_at_once(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    endpoint = TestFileFactory(size=16 * 1024 * 1024).endpoint
    page, watch = browser_page("operator")
    page.goto(f"{live_server.url}/campaigns/new/")
    shown = {
        name: (page.input_value(f"#id_{name}"), page.get_attribute(f"#id_{name}", "placeholder"))
        for name in ("methods", "patterns", "read_sizes", "fractions", "clients")
    }
    assert shown == {
        "methods": ("direct", "direct"),
        "patterns": ("sequential", "sequential"),
        "read_sizes": ("4k", "4k"),
        "fractions": ("0.1", "0.1"),
        "clients": ("1", "1"),
    }
    page.fill("#id_name", "defaults")
    page.select_option("#id_endpoints", str(endpoint.pk))
    page.fill("#id_clients", "")  # emptied: its default again, no browser bubble
    page.get_by_role("button", name="Preview").click()
    page.wait_for_selector("#preview")
    assert page.locator(".preview-runs").inner_text() == "1"
    watch.assert_clean()


def test_the_destination_endpoint_is_offered_once_a_copy_is_checked(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    """Operations are checkboxes, read checked by default; the destination of third-party
    copies is shown only with tpc-pull or tpc-push checked (no script: the page's CSS)."""
    TestFileFactory()
    page, watch = browser_page("operator")
    page.goto(f"{live_server.url}/campaigns/new/")
    assert page.locator("#id_operations input[value=read]").is_checked()
    assert not page.locator("#id_destination_endpoint").is_visible()
    page.locator("#id_operations input[value=write]").check()
    assert not page.locator("#id_destination_endpoint").is_visible()
    page.locator("#id_operations input[value=tpc-pull]").check()
    assert page.locator("#id_destination_endpoint").is_visible()
    watch.assert_clean()
