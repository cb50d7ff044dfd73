"""The refusals a newcomer meets by accident, in Chromium: a form sent after logging in again
in another tab, and an action's address opened from a bookmark. Each is a page of the site
that says what happened and where to go, and the form's input is not lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import CampaignFactory, TestFileFactory

pytestmark = pytest.mark.django_db(transaction=True)


def assert_clean_but(watch: Any, status: str) -> None:
    """Clean but for Chromium's own log line of the refusal's status."""
    assert watch.foreign_requests == [] and watch.dialogs == []
    assert all(status in error for error in watch.errors), watch.errors


def test_a_form_sent_after_logging_in_again_elsewhere_keeps_what_was_typed(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    endpoint = TestFileFactory().endpoint
    page, watch = browser_page("operator")
    page.goto(f"{live_server.url}/campaigns/new/")
    page.fill("#id_name", "typed before the other tab")
    page.select_option("#id_endpoints", str(endpoint.pk))

    other = page.context.new_page()  # another tab: logging in again renews the CSRF token
    other.goto(f"{live_server.url}/")
    other.get_by_role("button", name="Log out").click()
    other.wait_for_url("**/login/**")
    other.fill("#id_username", "operator-0")
    other.fill("#id_password", "x")
    other.get_by_role("button", name="Log in").click()
    other.wait_for_url(f"{live_server.url}/")
    other.close()

    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("#reason")
    assert "no longer valid" in page.inner_text("#reason")
    assert page.locator("nav[aria-label=Main]").is_visible()
    assert page.input_value("textarea[aria-label=name]") == "typed before the other tab"
    page.click("#back")
    page.wait_for_url(f"{live_server.url}/campaigns/new/")
    assert_clean_but(watch, "403")


def test_a_bookmarked_cancel_address_is_a_page_pointing_at_its_button(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    campaign = CampaignFactory()
    page, watch = browser_page("operator")
    response = page.goto(f"{live_server.url}/campaigns/{campaign.pk}/cancel/")
    assert response.status == 405
    assert "is an action (cancel), not a page" in page.inner_text("#reason")
    page.click("#action-page")
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign.pk}/")
    assert page.locator("h1").inner_text() == campaign.name
    assert_clean_but(watch, "405")
