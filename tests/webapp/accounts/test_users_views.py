"""The users page: admins list users, create them, change roles, deactivate and reactivate."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client
from pytest_django.fixtures import DjangoAssertNumQueries, Settings

from webapp.accounts.models import SsoIdentity
from webapp.accounts.roles import user_role
from webapp.accounts.selectors import user_list
from webapp.accounts.services import api_token_create, user_set_role

pytestmark = pytest.mark.django_db


def make(username: str, role: str, **fields: object) -> User:
    user = User.objects.create_user(username, **fields)  # type: ignore[arg-type]
    user_set_role(user=user, role=role)
    return user


@pytest.fixture
def root() -> User:
    return make("root", "admin")


@pytest.fixture
def admin_client(client: Client, root: User) -> Client:
    client.force_login(root)
    return client


def said(response: HttpResponse) -> list[str]:
    """The messages shown by the page the response redirects to (which uses them up)."""
    assert response.status_code == 302
    page = response.client.get(response.headers["Location"])  # type: ignore[attr-defined]
    return [str(message) for message in page.context["messages"]]


def row(page: str, username: str) -> str:
    match = re.search(rf"<tr[^>]*>\s*<td>{username}(.*?)</tr>", page, re.S)
    assert match, f"no row for {username}"
    return match.group(1)


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_only_admins_see_the_users_page(client: Client, role: str) -> None:
    client.force_login(make("someone", role))
    for path in ("/accounts/users/", "/accounts/users/new/"):
        response = client.get(path)
        assert response.status_code == 403
        assert b"only admins manage users" in response.content
    target = make("target", "viewer")
    assert client.post(f"/accounts/users/{target.pk}/role/", {"role": "admin"}).status_code == 403
    assert client.post(f"/accounts/users/{target.pk}/active/", {"active": "0"}).status_code == 403
    assert user_role(target) == "viewer"
    assert User.objects.get(pk=target.pk).is_active
    assert b'href="/accounts/users/"' not in client.get("/").content


def test_anonymous_users_are_sent_to_log_in(client: Client) -> None:
    response = client.post("/accounts/users/1/active/", {"active": "0"})
    assert response.headers["Location"].startswith("/accounts/login/")


def test_the_page_lists_role_active_flag_sign_in_last_login_and_token(
    admin_client: Client, root: User
) -> None:
    bob = make("bob", "operator", email="bob@example.org", password="x" * 12)
    bob.last_login = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)
    bob.save()
    api_token_create(user=bob)
    carol = make("carol", "viewer", is_active=False)
    SsoIdentity.objects.create(user=carol, issuer="https://iam.example.org", subject="c")

    page = admin_client.get("/accounts/users/").content.decode()

    assert 'href="/accounts/users/" aria-current="page">Users<' in page
    bob_row = row(page, "bob")
    assert "bob@example.org" in bob_row
    assert re.search(r"<td>operator</td>\s*<td>yes</td>\s*<td>password</td>", bob_row)
    assert '<time datetime="2026-11-03T09:30:00+00:00">2026-11-03 09:30</time>' in bob_row
    assert re.search(r"</td>\s*<td>yes</td>\s*<td>\s*<form", bob_row)  # the token
    carol_row = row(page, "carol")
    assert re.search(r"<td>viewer</td>\s*<td>deactivated</td>\s*<td>single sign-on</td>", carol_row)
    assert ">never<" in carol_row and "Reactivate carol" in carol_row
    assert page.index("<td>bob") < page.index("<td>root") < page.index("<td>carol")


def test_listing_users_takes_two_queries_however_many(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    for number in range(12):
        make(f"user{number}", ("viewer", "operator", "admin")[number % 3])
    with django_assert_num_queries(2):
        rows = user_list()
    roles = {r.user.username: r.role for r in rows}
    assert (roles["user0"], roles["user1"], roles["user2"]) == ("viewer", "operator", "admin")


def test_create_a_user_with_a_password(admin_client: Client) -> None:
    response = admin_client.post(
        "/accounts/users/new/",
        {
            "username": "dave",
            "email": "dave@example.org",
            "role": "operator",
            "sign_in": "password",
            "password": "long enough pass 42",
            "password_again": "long enough pass 42",
        },
    )
    assert (response.status_code, response.headers["Location"]) == (302, "/accounts/users/")
    assert said(response) == ["User dave was created."]
    dave = authenticate(username="dave", password="long enough pass 42")
    assert dave is not None and user_role(dave) == "operator"
    assert dave.email == "dave@example.org"


def test_create_a_user_who_signs_in_with_sso(admin_client: Client) -> None:
    response = admin_client.post(
        "/accounts/users/new/", {"username": "erin", "role": "viewer", "sign_in": "sso"}
    )
    assert response.status_code == 302
    erin = User.objects.get(username="erin")
    assert not erin.has_usable_password()
    assert user_role(erin) == "viewer"


@pytest.mark.parametrize(
    ("form", "field", "error"),
    [
        ({"username": "root"}, "username", "a user named &#x27;Root&#x27; exists already"),
        ({"username": "bad name"}, "username", "may hold only letters"),
        ({"email": "not-an-address"}, "email", "Enter a valid email address."),
        ({"role": "boss"}, "role", "Select a valid choice."),
        ({"password": ""}, "password", "give the user&#x27;s first password"),
        ({"password_again": "other"}, "password_again", "the two passwords differ"),
        ({"password": "dave1", "password_again": "dave1"}, "password", "too short"),
    ],
)
def test_bad_input_names_its_field_and_creates_nobody(
    admin_client: Client, form: dict[str, str], field: str, error: str
) -> None:
    data = {
        "username": "dave",
        "role": "viewer",
        "sign_in": "password",
        "password": "long enough pass 42",
        "password_again": "long enough pass 42",
    }
    if form.get("username") == "root":
        form = {"username": "Root"}
    data.update(form)
    response = admin_client.post("/accounts/users/new/", data)
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(rf'id="id_{field}_error">{field}: [^<]*{re.escape(error)}', page), page
    assert User.objects.count() == 1


def test_change_a_users_role(admin_client: Client) -> None:
    bob = make("bob", "viewer")
    response = admin_client.post(f"/accounts/users/{bob.pk}/role/", {"role": "operator"})
    assert response.headers["Location"] == "/accounts/users/"
    assert said(response) == ["bob is now operator."]
    assert user_role(bob) == "operator"


def test_an_unknown_role_is_refused_naming_the_field(admin_client: Client) -> None:
    bob = make("bob", "viewer")
    response = admin_client.post(f"/accounts/users/{bob.pk}/role/", {"role": "boss"})
    assert said(response) == [
        "bob: role: unknown role 'boss': choose one of viewer, operator, admin"
    ]
    assert user_role(bob) == "viewer"


def test_deactivate_and_reactivate_a_user(admin_client: Client) -> None:
    bob = make("bob", "operator", password="bobs password 77")
    response = admin_client.post(f"/accounts/users/{bob.pk}/active/", {"active": "0"})
    assert said(response) == ["bob was deactivated."]
    assert authenticate(username="bob", password="bobs password 77") is None
    assert User.objects.filter(pk=bob.pk).exists()  # never deleted
    response = admin_client.post(f"/accounts/users/{bob.pk}/active/", {"active": "1"})
    assert said(response) == ["bob was reactivated."]
    assert authenticate(username="bob", password="bobs password 77") == bob
    assert user_role(User.objects.get(pk=bob.pk)) == "operator"


def test_the_last_active_admin_cannot_demote_or_deactivate_themselves(
    admin_client: Client, root: User
) -> None:
    make("retired", "admin", is_active=False)
    response = admin_client.post(f"/accounts/users/{root.pk}/role/", {"role": "operator"})
    assert said(response) == [
        "root: role: root is the last active admin: make another user admin first"
    ]
    response = admin_client.post(f"/accounts/users/{root.pk}/active/", {"active": "0"})
    assert said(response) == [
        "root: active: root is the last active admin: make another user admin first"
    ]
    root.refresh_from_db()
    assert root.is_active and user_role(root) == "admin"


def test_an_admin_can_step_down_when_another_admin_is_left(
    admin_client: Client, root: User
) -> None:
    make("deputy", "admin")
    response = admin_client.post(f"/accounts/users/{root.pk}/role/", {"role": "viewer"})
    assert said(response) == ["root is now viewer."]
    assert user_role(root) == "viewer"
    assert admin_client.get("/accounts/users/").status_code == 403


def test_a_superuser_given_another_role_stops_being_one(admin_client: Client) -> None:
    boss = User.objects.create_superuser("boss", password="boss password 99")
    admin_client.post(f"/accounts/users/{boss.pk}/role/", {"role": "operator"})
    boss.refresh_from_db()
    assert (boss.is_superuser, boss.is_staff, user_role(boss)) == (False, False, "operator")


def test_the_last_admin_being_a_superuser_counts(client: Client) -> None:
    boss = User.objects.create_superuser("boss", password="boss password 99")
    client.force_login(boss)
    response = client.post(f"/accounts/users/{boss.pk}/active/", {"active": "0"})
    assert "boss is the last active admin" in said(response)[0]
    assert User.objects.get(pk=boss.pk).is_active


def test_sso_users_are_described_on_the_page_when_sso_is_on(
    admin_client: Client, settings: Settings
) -> None:
    settings.FEDPROBE_OIDC_ISSUER = "https://auth.cern.ch/auth/realms/cern"
    settings.FEDPROBE_OIDC_NAME = "CERN SSO"
    page = admin_client.get("/accounts/users/").content.decode()
    assert "Users who sign in with CERN SSO for the first time are added" in page
