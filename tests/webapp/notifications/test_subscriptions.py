"""Subscriptions over the API and on /subscriptions/: each user's own (admins see all), bad
input 400 naming the field with nothing saved, the egress policy on webhook URLs, and the
URL and secret never shown again (API, page, admin)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.factories import EndpointFactory, SiteFactory, api_for, page_for, user
from tests.webapp.notifications.conftest import T0, HttpReceiver, move, regression
from webapp.notifications.models import Delivery, Subscription
from webapp.notifications.outbox import notifications_pump
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db
SECRET = "hook-secret-0123456789abcdef"
URL_TOKEN = "T000/B000/url-token-abcdef0123456789"


def test_a_viewer_subscribes_by_email_to_a_site_with_their_own_address() -> None:
    viewer = user("vera", role="viewer")
    viewer.email = "vera@example.org"
    viewer.save()
    site = SiteFactory()
    answer = api_for(viewer).post(
        "/api/v1/subscriptions/", {"channel": "email", "target": "site", "target_id": site.pk}
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["email"] == "vera@example.org"
    assert answer.json()["owner"] == "vera" and answer.json()["digest"] is False


def test_a_webhook_url_and_secret_are_never_shown_again() -> None:
    owner = user("hooky")
    api = api_for(owner)
    body = {
        "channel": "webhook",
        "format": "slack",
        "url": f"http://127.0.0.1:9/services/{URL_TOKEN}",
        "secret_header": "Authorization",
        "secret": SECRET,
    }
    created = api.post("/api/v1/subscriptions/", body)
    assert created.status_code == 201, created.json()
    assert created.json()["destination"] == "http://127.0.0.1:9/…"
    assert created.json()["has_secret"] is True
    shown = [
        created.content,
        api.get("/api/v1/subscriptions/").content,
        api.get(f"/api/v1/subscriptions/{created.json()['id']}/").content,
        page_for(owner).get("/subscriptions/").content,
    ]
    root = Client()
    root.force_login(User.objects.create_superuser("root", password="x"))
    shown += [
        root.get("/admin/notifications/subscription/").content,
        root.get(f"/admin/notifications/subscription/{created.json()['id']}/change/").content,
    ]
    assert b"hooky" in shown[-1]
    for content in shown:
        assert SECRET.encode() not in content and URL_TOKEN.encode() not in content
    row = Subscription.objects.get()
    assert (row.url, row.secret) == (body["url"], SECRET)


def test_a_patch_without_url_or_secret_keeps_them() -> None:
    owner = user("keeper")
    api = api_for(owner)
    made = api.post(
        "/api/v1/subscriptions/",
        {
            "channel": "webhook",
            "url": "http://127.0.0.1:9/h",
            "secret_header": "X-T",
            "secret": SECRET,
        },
    ).json()
    answer = api.patch(f"/api/v1/subscriptions/{made['id']}/", {"digest": True})
    assert answer.status_code == 200, answer.json()
    row = Subscription.objects.get()
    assert (row.digest, row.url, row.secret) == (True, "http://127.0.0.1:9/h", SECRET)


def test_users_see_and_change_only_their_own_and_admins_all() -> None:
    alice, bob, admin = user("alice"), user("bob"), user("root", role="admin")
    mine = Subscription.objects.create(owner=alice, channel="email", email="a@example.org")
    Subscription.objects.create(owner=bob, channel="email", email="b@example.org")

    assert [s["id"] for s in api_for(alice).get("/api/v1/subscriptions/").json()["results"]] == [
        mine.pk
    ]
    assert (
        api_for(bob).patch(f"/api/v1/subscriptions/{mine.pk}/", {"active": False}).status_code
        == 404
    )
    assert api_for(bob).delete(f"/api/v1/subscriptions/{mine.pk}/").status_code == 404
    assert len(api_for(admin).get("/api/v1/subscriptions/").json()["results"]) == 2
    assert Subscription.objects.get(pk=mine.pk).active


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"channel": "email", "target": "site", "target_id": 999999}, "target_id"),
        ({"channel": "email", "target": "endpoint", "target_id": 999999}, "target_id"),
        ({"channel": "email", "target": "vantage_point", "target_id": 999999}, "target_id"),
        ({"channel": "email", "target": "site"}, "target_id"),
        ({"channel": "email", "target": "site", "target_id": str(2**63)}, "target_id"),
        ({"channel": "email", "target": "planet"}, "target"),
        ({"channel": "pigeon"}, "channel"),
        ({"channel": "webhook", "format": "teams", "url": "http://127.0.0.1:9/"}, "format"),
        ({"channel": "email", "email": "not-an-address"}, "email"),
        ({"channel": "webhook"}, "url"),
        ({"channel": "webhook", "url": "ftp://127.0.0.1/hook"}, "url"),
        ({"channel": "webhook", "url": "http://169.254.169.254/latest/meta-data/"}, "url"),
        ({"channel": "webhook", "url": "http://[::ffff:169.254.169.254]/"}, "url"),
        ({"channel": "webhook", "url": "http://10.1.2.3/hook"}, "url"),
        ({"channel": "webhook", "url": "http://127.0.0.1:9/", "secret": SECRET}, "secret_header"),
        (
            {
                "channel": "webhook",
                "url": "http://127.0.0.1:9/",
                "secret_header": "a b",
                "secret": "x",
            },
            "secret_header",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_saved(
    body: dict[str, Any], field: str
) -> None:
    owner = user("careful")
    owner.email = "c@example.org"
    owner.save()
    answer = api_for(owner).post("/api/v1/subscriptions/", body, format="json")
    assert answer.status_code == 400
    assert field in answer.json(), answer.json()
    assert not Subscription.objects.exists()


def test_a_webhook_to_a_refused_address_is_not_saved_by_a_patch_either() -> None:
    owner = user("patcher")
    api = api_for(owner)
    made = api.post("/api/v1/subscriptions/", {"channel": "webhook", "url": "http://127.0.0.1:9/"})
    answer = api.patch(
        f"/api/v1/subscriptions/{made.json()['id']}/", {"url": "http://169.254.169.254/"}
    )
    assert answer.status_code == 400 and "url" in answer.json()
    assert Subscription.objects.get().url == "http://127.0.0.1:9/"


def test_the_page_subscribes_to_an_endpoint_and_shows_its_name() -> None:
    owner = user("paula")
    owner.email = "paula@example.org"
    owner.save()
    endpoint = EndpointFactory()
    page = page_for(owner)
    answer = page.post(
        "/subscriptions/",
        {"about": f"endpoint:{endpoint.pk}", "channel": "email", "format": "generic"},
    )
    assert answer.status_code == 302
    row = Subscription.objects.get()
    assert (row.target, row.target_id, row.email) == ("endpoint", endpoint.pk, "paula@example.org")
    assert f"{endpoint.site.name}: {endpoint.name}" in page.get("/subscriptions/").content.decode()


def test_the_page_refuses_a_webhook_the_egress_policy_refuses() -> None:
    page = page_for(user("eve"))
    answer = page.post(
        "/subscriptions/",
        {
            "about": "all",
            "channel": "webhook",
            "format": "generic",
            "url": "http://169.254.169.254/",
        },
    )
    assert answer.status_code == 400
    assert "url: refused by the egress policy" in answer.content.decode()
    assert not Subscription.objects.exists()


def test_admins_see_failed_deliveries_with_their_error(http_receiver: HttpReceiver) -> None:
    owner = user("ops")
    Subscription.objects.create(
        owner=owner, channel="webhook", url=http_receiver.url, url_shown="http://127.0.0.1/…",
        secret_header="X-Token", secret=SECRET,
    )  # fmt: skip
    http_receiver.status = 410
    http_receiver.start()
    move(regression(), Regression.State.OPEN)
    notifications_pump(clock=lambda: T0)
    assert Delivery.objects.get().status == "failed"

    assert page_for(owner).get("/notifications/deliveries/").status_code == 403
    html = page_for(user("boss", role="admin")).get("/notifications/deliveries/").content.decode()
    assert "the receiver answered 410" in html and "failed" in html
    assert SECRET not in html
