"""The account page: see the role, create, rotate and revoke the API token."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.models import ApiToken, api_key_digest
from webapp.accounts.services import user_set_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client: Client) -> User:
    user = User.objects.create_user("olga")
    user_set_role(user=user, role="operator")
    client.force_login(user)
    return user


def _shown_token(html: bytes) -> str:
    match = re.search(rb'id="api-token">([0-9a-f]{40})<', html)
    assert match, "the page shows no token"
    return match.group(1).decode()


def test_account_page_shows_role_and_no_token(client: Client, operator: User) -> None:
    html = client.get("/accounts/").content
    assert b"operator" in html
    assert b"You have no token." in html


def test_created_token_is_shown_once_and_works_on_the_api(client: Client, operator: User) -> None:
    response = client.post("/accounts/", {"action": "create"})
    key = _shown_token(response.content)
    assert ApiToken.objects.get(user=operator).digest == api_key_digest(key)
    assert key.encode() not in client.get("/accounts/").content
    api = Client()
    assert api.get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_rotating_replaces_the_token(client: Client, operator: User) -> None:
    first = _shown_token(client.post("/accounts/", {"action": "create"}).content)
    second = _shown_token(client.post("/accounts/", {"action": "rotate"}).content)
    assert first != second
    assert Client().get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token {first}").status_code == 401


def test_creating_again_shows_no_key_and_keeps_the_token(client: Client, operator: User) -> None:
    key = _shown_token(client.post("/accounts/", {"action": "create"}).content)
    again = client.post("/accounts/", {"action": "create"}, follow=True)
    assert b'id="api-token"' not in again.content
    assert b"You have a token already" in again.content
    assert ApiToken.objects.get(user=operator).digest == api_key_digest(key)


def test_revoking_removes_the_token(client: Client, operator: User) -> None:
    client.post("/accounts/", {"action": "create"})
    response = client.post("/accounts/", {"action": "revoke"}, follow=True)
    assert not ApiToken.objects.filter(user=operator).exists()
    assert b"revoked" in response.content


def test_unknown_action_is_refused_and_changes_nothing(client: Client, operator: User) -> None:
    response = client.post("/accounts/", {"action": "steal"})
    assert response.status_code == 400
    assert b"action" in response.content
    assert not ApiToken.objects.exists()


def test_account_post_needs_csrf_token(operator: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post("/accounts/", {"action": "create"}).status_code == 403
    assert not ApiToken.objects.exists()
