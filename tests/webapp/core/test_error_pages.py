"""Error pages look like the other pages, keep the navigation and say why: 403 with what the
page needs and what the user is, 404 with what was not found, 500 without the database."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from django.urls import get_resolver

from tests.webapp.factories import CampaignFactory, VantagePointFactory
from webapp.accounts.services import user_set_role


def _login(client: Client, role: str | None) -> Client:
    user = User.objects.create_user(role or "norole")
    if role:
        user_set_role(user=user, role=role)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_viewer_opening_the_campaign_form_is_told_why_on_a_page_with_navigation(
    client: Client,
) -> None:
    response = _login(client, "viewer").get("/campaigns/new/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "Creating campaigns needs the operator role: you are a viewer." in html
    assert 'aria-label="Main"' in html and "css/fedprobe.css" in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "path", "reason"),
    [
        ("viewer", "/sites/new/", "Creating sites needs the operator role: you are a viewer"),
        (
            "operator",
            "/vantage-points/new/",
            "Creating vantage points needs the admin role: you are an operator (each names "
            "the queue that deployed workers consume)",
        ),
        (None, "/runs/", "Your account has no role yet"),
        (None, "/vantage-points/new/", "Your account has no role yet: an admin gives it one"),
    ],
)
def test_each_refusal_names_what_is_needed(
    client: Client, role: str | None, path: str, reason: str
) -> None:
    response = _login(client, role).get(path)
    assert response.status_code == 403
    assert reason in response.content.decode()


@pytest.mark.django_db
def test_a_refused_post_says_what_it_needed(client: Client) -> None:
    vantage_point = VantagePointFactory()
    response = _login(client, "viewer").post(f"/vantage-points/{vantage_point.pk}/edit/")
    assert response.status_code == 403
    assert "Editing vantage points needs the admin role: you are a viewer" in (
        response.content.decode()
    )


@pytest.mark.django_db
def test_not_found_is_a_page_with_navigation_and_what_was_missing(client: Client) -> None:
    _login(client, "viewer")
    missing = client.get("/no-such-page/")
    assert missing.status_code == 404
    html = missing.content.decode()
    assert "There is no page at <code>/no-such-page/</code>" in html
    assert 'aria-label="Main"' in html and "Resolver404" not in html
    no_row = client.get("/campaigns/999999/")
    assert no_row.status_code == 404
    assert "No campaign found matching the query" in no_row.content.decode()


def test_server_error_page_renders_without_the_database_or_a_user() -> None:
    # No django_db mark: any query would fail this test.
    handler = get_resolver().resolve_error_handler(500)
    response = handler(RequestFactory().get("/runs/"))
    assert response.status_code == 500
    html = response.content.decode()
    assert "Server error" in html and "css/fedprobe.css" in html and 'href="/"' in html
    assert 'aria-label="Main"' not in html  # no user: no navigation to pages behind a login


@pytest.mark.django_db
def test_every_page_links_a_favicon_that_exists(client: Client) -> None:
    html = _login(client, "viewer").get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
    assert client.get("/favicon.ico")["Location"] == "/static/favicon.svg"


@pytest.mark.django_db
def test_a_form_refused_for_its_csrf_token_is_shown_back_without_its_secrets() -> None:
    client = _login(Client(enforce_csrf_checks=True), "operator")
    client.get("/campaigns/new/")  # the form's page: the browser now holds a token
    typed = {
        "csrfmiddlewaretoken": "stale" * 10,
        "name": "night <b>sweep</b>",
        "read_sizes": "4k, 1M",
        "credential": "eyJhbGciOi-the-token",
        "oauth_client_secret": "s3cr3t-value",
        "url": "https://hook.example/T0/secret-path",
    }
    response = client.post(
        "/campaigns/new/", typed, HTTP_REFERER="http://testserver/campaigns/new/"
    )
    assert response.status_code == 403
    html = response.content.decode()
    assert 'aria-label="Main"' in html and "css/fedprobe.css" in html
    assert "DEBUG" not in html and "no longer valid" in html
    assert "night &lt;b&gt;sweep&lt;/b&gt;</textarea>" in html and "4k, 1M</textarea>" in html
    assert 'id="back" href="/campaigns/new/"' in html
    assert "Not shown, as they may hold a secret: credential, oauth_client_secret, url" in html
    for secret in ("eyJhbGciOi", "s3cr3t", "secret-path", "stale"):
        assert secret not in html


@pytest.mark.django_db
def test_opening_an_action_address_says_where_its_button_is(client: Client) -> None:
    campaign = CampaignFactory()
    response = _login(client, "operator").get(f"/campaigns/{campaign.pk}/cancel/")
    assert response.status_code == 405
    assert response["Allow"] == "POST, OPTIONS"
    html = response.content.decode()
    assert 'aria-label="Main"' in html and "is an action (cancel), not a page" in html
    assert f'id="action-page" href="/campaigns/{campaign.pk}/"' in html
    assert client.get("/api/v1/campaigns/").status_code == 200
    refused = client.get(f"/api/v1/campaigns/{campaign.pk}/launch/")
    assert refused.status_code == 405 and refused.json()["detail"]  # the API keeps its JSON
