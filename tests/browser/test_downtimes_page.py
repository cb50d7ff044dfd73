"""Downtimes in Chromium: an admin declares one on the site page's form, sees it listed there
and on /downtimes/, and deletes it from the site page; a hostile description stays text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import EndpointFactory, SiteFactory
from webapp.sites.models import Downtime

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)> dCache upgrade"


def test_declare_list_and_delete_a_downtime_on_the_site_page(
    browser_page: Callable[[str], tuple[Any, Any]], live_server: Any
) -> None:
    site = SiteFactory(name="browser-site")
    EndpointFactory(site=site, name="browser-root")
    page, watch = browser_page("admin")
    page.goto(f"{live_server.url}/sites/{site.pk}/")
    rows = page.locator("#downtime-table tbody tr")
    assert rows.inner_text().strip() == "No current or upcoming downtime."
    page.locator("details.downtime-add summary").click()
    form = page.locator("#downtime-form")
    form.locator("input[name=start]").fill("2030-01-01T10:00")
    form.locator("input[name=end]").fill("2030-01-01T14:30")
    form.locator("select[name=severity]").select_option("outage")
    form.locator("input[name=scheduled]").check()
    form.locator("input[name=description]").fill(HOSTILE)
    form.locator("button[type=submit]").click()
    page.wait_for_url(f"{live_server.url}/sites/{site.pk}/")

    downtime = Downtime.objects.get()
    assert (downtime.site_id, downtime.severity, downtime.scheduled) == (site.pk, "outage", True)
    row = page.locator(f'#downtime-table tr[data-downtime-id="{downtime.pk}"]')
    cells = row.locator("td").all_inner_texts()
    assert cells[:7] == [
        "site browser-site",
        "2030-01-01 10:00",
        "2030-01-01 14:30",
        "outage",
        "scheduled",
        HOSTILE,
        "upcoming",
    ]
    page.goto(f"{live_server.url}/downtimes/")
    assert page.locator(f'tr[data-downtime-id="{downtime.pk}"]').count() == 1

    page.goto(f"{live_server.url}/sites/{site.pk}/")
    row.locator("button", has_text="Delete").click()
    page.wait_for_url(f"{live_server.url}/sites/{site.pk}/")
    assert not Downtime.objects.exists()
    assert page.locator("#downtime-table tbody tr").inner_text().strip() == (
        "No current or upcoming downtime."
    )
    watch.assert_clean()
