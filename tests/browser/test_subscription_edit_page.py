"""A subscription edited on its page in Chromium: a refused webhook URL is named and changes
nothing; then what it is about, the digest and pausing change, and the webhook's URL and
secret, left empty, are kept (and never shown)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.webapp.factories import SiteFactory
from webapp.notifications.models import Subscription

pytestmark = pytest.mark.django_db(transaction=True)
URL = "http://127.0.0.1:9/services/T000/B000/url-token-abcdef"
SECRET = "hook-secret-0123456789abcdef"


def test_a_user_edits_a_webhook_subscription_and_keeps_its_url_and_secret(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    site = SiteFactory(name="CERN-PROD")
    page, watch = browser_page("viewer")
    owner = User.objects.get(username="viewer-0")
    row = Subscription.objects.create(
        owner=owner, channel="webhook", url=URL, url_shown="http://127.0.0.1:9/…",
        secret_header="X-Token", secret=SECRET,
    )  # fmt: skip
    page.goto(f"{live_server.url}/subscriptions/")
    page.get_by_role("link", name="Edit the subscription to Everything").click()
    expect(page.get_by_role("heading", name="Edit subscription")).to_be_visible()
    expect(page.get_by_label("URL")).to_have_value("")
    expect(page.get_by_label("Secret header")).to_have_value("X-Token")
    assert SECRET not in page.content() and "url-token" not in page.content()

    page.get_by_label("URL").fill("http://169.254.169.254/latest/")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("url: refused by the egress policy")).to_be_visible()
    assert Subscription.objects.get().url == URL
    assert [e for e in watch.errors if "status of 400" not in e] == []
    watch.errors.clear()

    page.get_by_label("About").select_option(label="CERN-PROD")
    page.get_by_label("Digest").check()
    page.get_by_label("Active").uncheck()
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    table = page.locator(f"#subscription-{row.pk}")
    expect(table).to_contain_text("CERN-PROD")
    expect(table).to_contain_text("daily digest")
    expect(table).to_contain_text("paused")
    changed = Subscription.objects.get()
    assert (changed.target, changed.target_id, changed.digest, changed.active) == (
        "site",
        site.pk,
        True,
        False,
    )
    assert (changed.url, changed.secret) == (URL, SECRET)
    watch.assert_clean()
