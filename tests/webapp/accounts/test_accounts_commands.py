"""`manage.py apitoken` and `manage.py setrole`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.authtoken.models import Token

from webapp.accounts.roles import user_role

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_apitoken_creates_the_users_token_and_prints_it() -> None:
    user = User.objects.create_user("alice")
    printed = run("apitoken", "alice")
    assert printed == Token.objects.get(user=user).key + "\n"


def test_apitoken_prints_the_same_token_again() -> None:
    User.objects.create_user("alice")
    assert run("apitoken", "alice") == run("apitoken", "alice")
    assert Token.objects.count() == 1


def test_apitoken_rotate_replaces_the_token() -> None:
    user = User.objects.create_user("alice")
    old = run("apitoken", "alice").strip()
    new = run("apitoken", "alice", "--rotate").strip()
    assert new != old
    assert list(Token.objects.filter(user=user).values_list("key", flat=True)) == [new]


def test_apitoken_for_unknown_user_fails_with_status_1_and_creates_nothing() -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'") as failure:
        run("apitoken", "nobody")
    assert failure.value.returncode == 1
    assert not Token.objects.exists()


def test_apitoken_for_inactive_user_fails() -> None:
    User.objects.create_user("gone", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        run("apitoken", "gone")
    assert not Token.objects.exists()


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
