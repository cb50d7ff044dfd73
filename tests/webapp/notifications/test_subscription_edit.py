"""Changing a subscription, with PATCH and on its edit page: what about, channel, format and
paused change; the write-only URL and secret are kept when left out and replaced when given;
bad input answers 400 naming the field and changes nothing; only its owner, its team's
members or an admin may."""

from __future__ import annotations

from typing import Any

import pytest
from django.forms.models import model_to_dict

from tests.webapp.factories import EndpointFactory, SiteFactory, api_for, member, page_for, team
from webapp.notifications.models import Subscription

pytestmark = pytest.mark.django_db
SECRET = "hook-secret-0123456789abcdef"
NEW_SECRET = "other-secret-fedcba9876543210"
URL = "http://127.0.0.1:9/services/T000/B000/url-token-abcdef"


def webhook_of(owner: Any) -> Subscription:
    answer = api_for(owner).post(
        "/api/v1/subscriptions/",
        {
            "channel": "webhook",
            "format": "slack",
            "url": URL,
            "secret_header": "X-Token",
            "secret": SECRET,
        },
    )
    assert answer.status_code == 201, answer.json()
    return Subscription.objects.get(pk=answer.json()["id"])


def saved(row: Subscription) -> dict[str, Any]:
    return model_to_dict(Subscription.objects.get(pk=row.pk))


def test_a_patch_changes_the_filter_channel_and_active_and_keeps_the_rest() -> None:
    owner = member("olga")
    row = webhook_of(owner)
    site = SiteFactory()
    api = api_for(owner)

    answer = api.patch(
        f"/api/v1/subscriptions/{row.pk}/",
        {"target": "site", "target_id": site.pk, "active": False},
    )
    assert answer.status_code == 200, answer.json()
    assert (answer.json()["target"], answer.json()["target_id"]) == ("site", site.pk)
    assert (answer.json()["owner"], answer.json()["team"], answer.json()["team_name"]) == (
        "olga",
        None,
        None,
    )
    changed = Subscription.objects.get()
    assert (changed.target_id, changed.active) == (site.pk, False)
    assert (changed.url, changed.secret, changed.format) == (URL, SECRET, "slack")
    assert SECRET not in answer.content.decode() and "url-token" not in answer.content.decode()

    answer = api.patch(f"/api/v1/subscriptions/{row.pk}/", {"target": "all", "channel": "email"})
    assert answer.status_code == 200, answer.json()
    changed = Subscription.objects.get()
    assert (changed.channel, changed.email, changed.target, changed.target_id) == (
        "email",
        "olga@example.org",
        "all",
        None,
    )
    assert (changed.url, changed.secret) == ("", "")  # an email has no webhook


def test_a_patch_giving_the_url_or_secret_replaces_them() -> None:
    owner = member("rhea")
    row = webhook_of(owner)
    api = api_for(owner)
    answer = api.patch(
        f"/api/v1/subscriptions/{row.pk}/",
        {"url": "http://localhost:9/new", "secret": NEW_SECRET},
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["destination"] == "http://localhost:9/…"
    changed = Subscription.objects.get()
    assert (changed.url, changed.secret, changed.secret_header) == (
        "http://localhost:9/new",
        NEW_SECRET,
        "X-Token",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"channel": "pigeon"}, "channel"),
        ({"format": "teams"}, "format"),
        ({"target": "planet"}, "target"),
        ({"target": "site", "target_id": 999999}, "target_id"),
        ({"target": "endpoint"}, "target_id"),
        ({"url": "http://169.254.169.254/latest/"}, "url"),
        ({"url": "ftp://127.0.0.1/hook"}, "url"),
        ({"secret_header": "a b"}, "secret_header"),
        ({"secret": "two\nlines"}, "secret"),
        ({"active": "perhaps"}, "active"),
        ({"channel": "email", "email": "not-an-address"}, "email"),
        ({"team": "TEAM"}, "team"),
        ({"owner_id": 1}, None),  # read-only: ignored, not a change
    ],
)
def test_a_bad_patch_answers_400_naming_the_field_and_changes_nothing(
    body: dict[str, Any], field: str | None
) -> None:
    owner = member("bea", role="operator")
    row = webhook_of(owner)
    if body.get("team") == "TEAM":
        body = {"team": team("ops", manager=owner).pk}
    before = saved(row)
    answer = api_for(owner).patch(f"/api/v1/subscriptions/{row.pk}/", body, format="json")
    if field is None:
        assert answer.status_code == 200
    else:
        assert answer.status_code == 400
        assert field in answer.json(), answer.json()
    assert saved(row) == before


def test_the_edit_page_changes_a_subscription_and_keeps_the_url_and_secret_left_empty() -> None:
    owner = member("paula")
    row = webhook_of(owner)
    endpoint = EndpointFactory()
    page = page_for(owner)
    form = page.get(f"/subscriptions/{row.pk}/edit/")
    assert form.status_code == 200
    html = form.content.decode()
    assert 'value="X-Token"' in html and SECRET not in html and "url-token" not in html

    answer = page.post(
        f"/subscriptions/{row.pk}/edit/",
        {
            "about": f"endpoint:{endpoint.pk}",
            "channel": "webhook",
            "format": "generic",
            "secret_header": "X-Token",
            "digest": "on",
            "active": "on",
        },
    )
    assert answer.status_code == 302
    changed = Subscription.objects.get()
    assert (changed.target, changed.target_id, changed.format, changed.digest) == (
        "endpoint",
        endpoint.pk,
        "generic",
        True,
    )
    assert (changed.url, changed.secret, changed.active) == (URL, SECRET, True)
    assert f"{endpoint.site.name}: {endpoint.name}" in page.get("/subscriptions/").content.decode()


def test_the_edit_page_refuses_bad_input_naming_the_field_and_changes_nothing() -> None:
    owner = member("eve")
    row = webhook_of(owner)
    before = saved(row)
    answer = page_for(owner).post(
        f"/subscriptions/{row.pk}/edit/",
        {
            "about": "all",
            "channel": "webhook",
            "format": "generic",
            "url": "http://169.254.169.254/",
            "active": "on",
        },
    )
    assert answer.status_code == 400
    assert "url: refused by the egress policy" in answer.content.decode()
    assert saved(row) == before


def test_only_the_owner_the_team_or_an_admin_may_open_the_edit_page() -> None:
    owner, stranger = member("own"), member("stranger")
    row = webhook_of(owner)
    assert page_for(stranger).get(f"/subscriptions/{row.pk}/edit/").status_code == 404
    assert page_for(stranger).post(f"/subscriptions/{row.pk}/delete/").status_code == 404
    assert (
        page_for(member("boss", role="admin")).get(f"/subscriptions/{row.pk}/edit/").status_code
        == 200
    )

    lead = member("lead", role="operator")
    ops = team("ops", manager=lead, members=[stranger])
    shared = Subscription.objects.create(team=ops, channel="email")
    assert page_for(stranger).get(f"/subscriptions/{shared.pk}/edit/").status_code == 200
    assert page_for(owner).get(f"/subscriptions/{shared.pk}/edit/").status_code == 404


def test_the_page_subscribes_a_team_the_user_is_in_and_offers_no_other() -> None:
    lead = member("lead", role="operator")
    ops = team("ops", manager=lead)
    other = team("other", manager=member("otherlead", role="operator"))
    page = page_for(lead)
    html = page.get("/subscriptions/").content.decode()
    assert f'value="{ops.pk}"' in html and "team ops" in html and "team other" not in html

    refused = page.post(
        "/subscriptions/",
        {"team": other.pk, "about": "all", "channel": "email", "format": "generic"},
    )
    assert refused.status_code == 400 and not Subscription.objects.exists()
    answer = page.post(
        "/subscriptions/", {"team": ops.pk, "about": "all", "channel": "email", "format": "generic"}
    )
    assert answer.status_code == 302
    made = Subscription.objects.get()
    assert (made.team, made.owner, made.email) == (ops, None, "")
    assert "team ops" in page.get("/subscriptions/").content.decode()


def test_a_new_url_without_the_secret_is_refused_so_the_secret_never_follows_it() -> None:
    """The saved secret was given for its URL: another team member (or the owner) moving the
    webhook elsewhere must give the secret again, or the team's secret would go there."""
    owner = member("ida")
    row = webhook_of(owner)
    before = saved(row)
    api = api_for(owner)
    url = f"/api/v1/subscriptions/{row.pk}/"
    answer = api.patch(url, {"url": "http://localhost:9/elsewhere"}, format="json")
    assert answer.status_code == 400 and "secret" in answer.json(), answer.json()
    assert saved(row) == before
    same = api.patch(url, {"url": URL, "active": False}, format="json")
    assert same.status_code == 200, same.json()  # the same url keeps its secret
    assert Subscription.objects.get().secret == SECRET
    moved = api.patch(url, {"url": "http://localhost:9/elsewhere", "secret": ""}, format="json")
    assert moved.status_code == 200, moved.json()
    assert (Subscription.objects.get().url, Subscription.objects.get().secret) == (
        "http://localhost:9/elsewhere",
        "",
    )
