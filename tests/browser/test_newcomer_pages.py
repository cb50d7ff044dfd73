"""What a newcomer trips over, in Chromium: a refused page says why and keeps the navigation,
reloading after Test connection shows the outcome again (no 405), no page asks for anything
that is not there (the favicon), one nav item is current, and the pages' scripts write
figures in the units the page names."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import TestFileFactory, VantagePointFactory

pytestmark = pytest.mark.django_db(transaction=True)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def failed_responses(page: Any) -> list[str]:
    failed: list[str] = []
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    return failed


def test_vantage_points_page_has_its_icon_one_current_nav_item_and_unit_helpers(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    VantagePointFactory(name="cern")
    page, watch = browser_page("viewer")
    failed = failed_responses(page)
    page.goto(f"{live_server.url}/vantage-points/")
    current = page.eval_on_selector_all(
        "nav [aria-current=page]", "links => links.map(a => a.textContent)"
    )
    assert current == ["Vantage points"]
    assert "--concurrency 1" in page.locator("main code").first.inner_text()
    icon = page.get_attribute("link[rel=icon]", "href")
    answer = page.request.get(f"{live_server.url}{icon}")
    assert answer.status == 200 and b"<svg" in answer.body()
    assert page.evaluate("[fedprobeUnits.size(16777216), fedprobeUnits.latencyUs(1234)]") == [
        "16 MiB",
        "1.23 ms",
    ]
    assert "1 MiB = 1,048,576 bytes" in page.locator("#units-note").inner_text()
    assert failed == []
    watch.assert_clean()


def test_a_viewer_opening_the_campaign_form_reads_why_on_a_styled_page(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    page, watch = browser_page("viewer")
    response = page.goto(f"{live_server.url}/campaigns/new/")
    assert response.status == 403
    assert page.locator("#reason").inner_text() == (
        "Creating campaigns needs the operator role: you are a viewer."
    )
    assert page.get_by_role("navigation", name="Main").is_visible()
    assert page.locator("header.topbar").evaluate("h => getComputedStyle(h).display") == "flex"
    # Chromium logs the page's own 403 status; nothing else may fail.
    assert all("403" in error for error in watch.errors), watch.errors
    page.click("text=Back to the home page")
    page.wait_for_url(f"{live_server.url}/")


def test_reloading_after_test_connection_shows_the_outcome_again(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    endpoint = TestFileFactory(endpoint__base_url=f"root://127.0.0.1:{closed_port()}/").endpoint
    page, watch = browser_page("operator")
    page.goto(f"{live_server.url}/endpoints/{endpoint.pk}/")
    page.click("button:has-text('Test connection')")
    page.wait_for_url(f"{live_server.url}/endpoints/{endpoint.pk}/")
    assert "Connection test: failed" in page.locator("#connection-check").inner_text()
    response = page.reload()
    assert response.status == 200
    assert "refused" in page.locator("#connection-check").inner_text()
    watch.assert_clean()


def test_a_connection_test_from_before_the_credential_changed_is_shown_stale(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    endpoint = TestFileFactory(endpoint__base_url=f"root://127.0.0.1:{closed_port()}/").endpoint
    page, watch = browser_page("admin")
    page.goto(f"{live_server.url}/endpoints/{endpoint.pk}/")
    page.click("button:has-text('Test connection')")
    page.wait_for_url(f"{live_server.url}/endpoints/{endpoint.pk}/")
    assert page.locator(".check-stale").count() == 0

    page.goto(f"{live_server.url}/endpoints/{endpoint.pk}/edit/")
    page.select_option("#id_credential_kind", "token")
    page.fill("#id_credential", "an-opaque-token-0123456789")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"{live_server.url}/endpoints/{endpoint.pk}/")
    check = page.locator("#connection-check")
    assert "Connection test: failed (stale)" in check.inner_text()
    assert "address or credential changed since this test" in check.inner_text()

    page.click("button:has-text('Test connection')")
    page.wait_for_url(f"{live_server.url}/endpoints/{endpoint.pk}/")
    assert page.locator(".check-stale").count() == 0
    watch.assert_clean()
