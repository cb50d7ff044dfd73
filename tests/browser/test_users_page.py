"""The users page and single sign-on in Chromium: an admin makes a user, changes the role and
deactivates; a new user signs in through a live OpenID Connect provider."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from pytest_django.fixtures import Settings

from tests.browser.conftest import VIEWPORT
from tests.oidc_provider import OidcProvider
from webapp.accounts.oidc import forget_provider_configuration
from webapp.accounts.roles import user_role

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_creates_a_user_changes_the_role_and_deactivates(
    browser_page: Callable[..., Any],
    live_server: Any,
    screenshot: Callable[[Any, str], Path],
) -> None:
    page, watch = browser_page("admin")
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="Users").click()
    page.get_by_role("link", name="New user").click()
    page.get_by_label("User name").fill("dave")
    page.get_by_label("Role").select_option("operator")
    page.locator("#id_password").fill("long enough pass 42")
    page.locator("#id_password_again").fill("long enough pass 42")
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_text("User dave was created.")).to_be_visible()

    page.get_by_label("Role of dave", exact=True).select_option("viewer")
    page.get_by_role("button", name="Set the role of dave").click()
    expect(page.get_by_text("dave is now viewer.")).to_be_visible()
    page.get_by_role("button", name="Deactivate dave").click()
    expect(page.get_by_text("dave was deactivated.")).to_be_visible()
    expect(page.get_by_role("button", name="Reactivate dave")).to_be_visible()
    screenshot(page, "users")
    dave = User.objects.get(username="dave")
    assert not dave.is_active
    dave.is_active = True
    assert user_role(dave) == "viewer"
    watch.assert_clean()


def test_a_new_user_signs_in_with_the_provider(
    chromium: Any, live_server: Any, settings: Settings
) -> None:
    with OidcProvider(client_id="fedprobe", client_secret="browser-secret-1") as provider:
        provider.user = {"sub": "s-9", "preferred_username": "frank", "groups": ["ops"]}
        settings.FEDPROBE_OIDC_ISSUER = provider.issuer
        settings.FEDPROBE_OIDC_NAME = "Test IAM"
        settings.OIDC_RP_CLIENT_ID = "fedprobe"
        settings.OIDC_RP_CLIENT_SECRET = "browser-secret-1"
        settings.FEDPROBE_OIDC_ROLE_MAP = {"ops": "operator"}
        forget_provider_configuration()
        context = chromium.new_context(viewport=VIEWPORT)
        visited: list[str] = []
        context.on("request", lambda request: visited.append(request.url))
        page = context.new_page()
        try:
            page.goto(f"{live_server.url}/runs/")
            page.get_by_role("link", name="Sign in with Test IAM").click()
            page.wait_for_url(f"{live_server.url}/runs/")
            expect(page.get_by_role("link", name="frank")).to_be_visible()
        finally:
            context.close()
            forget_provider_configuration()
    assert any(url.startswith(f"{provider.issuer}/authorize?") for url in visited)
    assert {urlish.split("/")[2] for urlish in visited} <= {
        live_server.url.split("/")[2],
        provider.issuer.split("/")[2],
    }
    assert user_role(User.objects.get(username="frank")) == "operator"
