"""`manage.py apitoken` and `manage.py setrole`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from webapp.accounts.models import ApiToken, api_key_digest
from webapp.accounts.roles import user_role

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_apitoken_creates_the_users_token_and_prints_its_key() -> None:
    user = User.objects.create_user("alice")
    printed = run("apitoken", "alice")
    key = printed.removesuffix("\n")
    assert ApiToken.objects.get(user=user).digest == api_key_digest(key)


def test_apitoken_never_prints_an_existing_key_again() -> None:
    User.objects.create_user("alice")
    key = run("apitoken", "alice").strip()
    out = StringIO()
    with pytest.raises(CommandError, match=r"has an API token already.*--rotate"):
        call_command("apitoken", "alice", stdout=out)
    assert key not in out.getvalue()
    assert ApiToken.objects.get().digest == api_key_digest(key)


def test_apitoken_rotate_replaces_the_token() -> None:
    user = User.objects.create_user("alice")
    old = run("apitoken", "alice").strip()
    new = run("apitoken", "alice", "--rotate").strip()
    assert new != old
    assert list(ApiToken.objects.filter(user=user).values_list("digest", flat=True)) == [
        api_key_digest(new)
    ]


def test_apitoken_for_unknown_user_fails_with_status_1_and_creates_nothing() -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'") as failure:
        run("apitoken", "nobody")
    assert failure.value.returncode == 1
    assert not ApiToken.objects.exists()


def test_apitoken_for_inactive_user_fails() -> None:
    User.objects.create_user("gone", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        run("apitoken", "gone")
    assert not ApiToken.objects.exists()


def test_setrole_gives_the_user_that_role() -> None:
    user = User.objects.create_user("bob")
    assert run("setrole", "bob", "operator") == "bob is now operator\n"
    assert user_role(user) == "operator"
    run("setrole", "bob", "viewer")
    assert user_role(user) == "viewer"


def test_setrole_for_unknown_user_fails() -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        run("setrole", "nobody", "admin")


def test_setrole_refuses_an_unknown_role() -> None:
    User.objects.create_user("bob")
    with pytest.raises(CommandError, match="invalid choice"):
        run("setrole", "bob", "boss")
