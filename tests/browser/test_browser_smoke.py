"""Pages load in a real Chromium with no outside requests, dialogs or script errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import SiteFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_home_page_loads_clean_in_chromium(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/")
    assert page.get_by_role("navigation", name="Main").is_visible()
    watch.assert_clean()


def test_plotly_is_served_from_our_static_files(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/")
    page.add_script_tag(url=f"{live_server.url}/static/vendor/plotly/plotly-cartesian-4.1.1.min.js")
    page.add_script_tag(url=f"{live_server.url}/static/js/charts.js")
    assert page.evaluate("Plotly.version") == "4.1.1"
    escaped = page.evaluate("fedprobe.text('<img src=x onerror=alert(1)>')")
    assert escaped == "&lt;img src=x onerror=alert(1)&gt;"
    watch.assert_clean()


def test_a_hostile_site_name_is_text_in_the_page(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    site = SiteFactory(name="<img src=x onerror=alert(1)>")
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/sites/{site.pk}/")
    assert page.get_by_text("<img src=x onerror=alert(1)>").first.is_visible()
    assert page.locator("img[src=x]").count() == 0
    watch.assert_clean()
