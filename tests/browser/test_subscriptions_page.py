"""The subscriptions page in Chromium: a webhook to a metadata address is refused naming the
field, an email subscription to a site is made and listed by the site's name, then removed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.webapp.factories import SiteFactory
from webapp.notifications.models import Subscription

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_user_subscribes_to_a_site_by_email_and_unsubscribes(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    site = SiteFactory(name="CERN-PROD")
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="Subscriptions").click()
    expect(page.get_by_text("No subscriptions yet.")).to_be_visible()

    page.get_by_label("About").select_option(label="CERN-PROD")
    page.get_by_label("Channel").select_option("webhook")
    page.get_by_label("URL").fill("http://169.254.169.254/latest/")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_text("url: refused by the egress policy")).to_be_visible()
    assert not Subscription.objects.exists()
    # The refused form comes back as a 400, which Chromium logs: that one line only.
    assert [e for e in watch.errors if "status of 400" not in e] == []
    watch.errors.clear()

    page.get_by_label("About").select_option(label="CERN-PROD")
    page.get_by_label("Channel").select_option("email")
    page.get_by_label("Email").fill("ops@example.org")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.get_by_text("Subscribed.")).to_be_visible()
    table = page.locator("#subscriptions")
    expect(table).to_contain_text("CERN-PROD")
    expect(table).to_contain_text("ops@example.org")
    assert Subscription.objects.get().target_id == site.pk

    page.get_by_role("button", name="Unsubscribe from CERN-PROD").click()
    expect(page.get_by_text("Unsubscribed.")).to_be_visible()
    assert not Subscription.objects.exists()
    watch.assert_clean()
