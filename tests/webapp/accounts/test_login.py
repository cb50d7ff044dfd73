"""The login page: signs users in, throttles guessing per client address."""

from __future__ import annotations

import pytest
from django.conf import global_settings
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

pytestmark = pytest.mark.django_db

LOGIN_RATE = 10  # FEDPROBE_THROTTLE_LOGIN's default, per minute


@pytest.fixture
def alice(settings: Settings) -> User:
    # A fast hasher: the throttle tests make many login attempts.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return User.objects.create_user("alice", password="correct horse battery staple")


def test_login_page_shows_a_form_with_csrf_token(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="csrfmiddlewaretoken"' in response.content
    assert b'type="password"' in response.content


def test_login_with_the_right_password_signs_in_and_redirects(client: Client, alice: User) -> None:
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "correct horse battery staple"}
    )
    assert (response.status_code, response.headers["Location"]) == (302, "/")
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_login_with_the_production_hasher_signs_in(client: Client, settings: Settings) -> None:
    """The test settings hash with MD5 first (tests/settings.py): here the production list
    (webapp.settings sets none: Django's, PBKDF2 first) hashes, checks and signs in."""
    import webapp.settings as production

    assert not hasattr(production, "PASSWORD_HASHERS")
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    bob = User.objects.create_user("bob", password="correct horse battery staple")
    assert bob.password.startswith("pbkdf2_sha256$")
    response = client.post(
        "/accounts/login/", {"username": "bob", "password": "correct horse battery staple"}
    )
    assert (response.status_code, response.headers["Location"]) == (302, "/")
    assert client.session["_auth_user_id"] == str(bob.pk)
    bob.refresh_from_db()
    assert bob.password.startswith("pbkdf2_sha256$")  # not rehashed to another


def test_login_with_a_wrong_password_says_so(client: Client, alice: User) -> None:
    response = client.post("/accounts/login/", {"username": "alice", "password": "guess"})
    assert response.status_code == 200
    assert b"did not match" in response.content
    assert "_auth_user_id" not in client.session


def test_login_post_without_csrf_token_is_refused(alice: User) -> None:
    browser = Client(enforce_csrf_checks=True)
    response = browser.post(
        "/accounts/login/", {"username": "alice", "password": "correct horse battery staple"}
    )
    assert response.status_code == 403


def test_too_many_login_attempts_from_one_address_are_refused(client: Client, alice: User) -> None:
    for _ in range(LOGIN_RATE):
        client.post("/accounts/login/", {"username": "alice", "password": "guess"})
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "correct horse battery staple"}
    )
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0
    assert b"Too many login attempts" in response.content
    assert "_auth_user_id" not in client.session


def test_login_throttle_counts_per_client_address(client: Client, alice: User) -> None:
    for _ in range(LOGIN_RATE):
        client.post("/accounts/login/", {"username": "alice", "password": "guess"})
    other = Client(REMOTE_ADDR="192.0.2.7")
    response = other.post(
        "/accounts/login/", {"username": "alice", "password": "correct horse battery staple"}
    )
    assert response.status_code == 302


def test_logout_signs_out(client: Client, alice: User) -> None:
    client.force_login(alice)
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert "_auth_user_id" not in client.session


@pytest.fixture
def admin_alice(alice: User) -> User:
    alice.is_staff = alice.is_superuser = True
    alice.save()
    return alice


def test_too_many_admin_login_attempts_are_refused(client: Client, admin_alice: User) -> None:
    for _ in range(2 * LOGIN_RATE):
        client.post("/admin/login/", {"username": "alice", "password": "guess"})
    response = client.post(
        "/admin/login/", {"username": "alice", "password": "correct horse battery staple"}
    )
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session


def test_admin_and_page_logins_share_one_count(client: Client, admin_alice: User) -> None:
    for _ in range(LOGIN_RATE):
        client.post("/accounts/login/", {"username": "alice", "password": "guess"})
    response = client.post(
        "/admin/login/", {"username": "alice", "password": "correct horse battery staple"}
    )
    assert response.status_code == 429


def test_admin_login_with_the_right_password_signs_in(client: Client, admin_alice: User) -> None:
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "alice", "password": "correct horse battery staple", "next": "/admin/"},
    )
    assert (response.status_code, response.headers["Location"]) == (302, "/admin/")
    assert client.session["_auth_user_id"] == str(admin_alice.pk)
