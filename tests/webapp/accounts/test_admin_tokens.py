"""The Django admin shows API tokens by user and prefix, never a key (issue 10, item 6)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.models import ApiToken
from webapp.accounts.services import api_token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root-admin", password="x"))
    return client


def test_the_admin_has_no_page_of_drf_tokens(superuser: Client) -> None:
    api_token_create(user=User.objects.create_user("someone"))
    assert superuser.get("/admin/authtoken/tokenproxy/").status_code == 404
    assert "authtoken" not in superuser.get("/admin/").content.decode().lower()


def test_the_admin_lists_user_prefix_and_dates_never_the_key(superuser: Client) -> None:
    key = api_token_create(user=User.objects.create_user("someone"))
    token = ApiToken.objects.get()
    listed = superuser.get("/admin/accounts/apitoken/").content.decode()
    assert "someone" in listed
    assert token.prefix in listed
    page = superuser.get(f"/admin/accounts/apitoken/{token.pk}/change/")
    assert page.status_code == 200
    for text in (listed, page.content.decode()):
        assert key not in text
        assert token.digest not in text


def test_the_admin_makes_no_token_and_edits_none(superuser: Client) -> None:
    api_token_create(user=User.objects.create_user("someone"))
    token = ApiToken.objects.get()
    assert superuser.get("/admin/accounts/apitoken/add/").status_code == 403
    changed = superuser.post(f"/admin/accounts/apitoken/{token.pk}/change/", {"prefix": "00000000"})
    assert changed.status_code == 403
    token.refresh_from_db()
    assert token.prefix != "00000000"


def test_the_admin_revokes_a_token(superuser: Client) -> None:
    key = api_token_create(user=User.objects.create_user("someone"))
    token = ApiToken.objects.get()
    superuser.post(f"/admin/accounts/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert not ApiToken.objects.exists()
    assert Client().get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
