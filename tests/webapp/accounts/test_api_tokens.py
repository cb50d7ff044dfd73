"""API tokens are stored as digests: a key is shown once and authenticates as long as its
token lives (issue 10, item 6)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from webapp.accounts.models import ApiToken, api_key_digest
from webapp.accounts.services import (
    ApiTokenExists,
    api_token_create,
    api_token_rotate,
    user_set_role,
)

pytestmark = pytest.mark.django_db


def api_get(key: str) -> Any:
    return Client().get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token {key}")


@pytest.fixture
def viewer() -> User:
    user = User.objects.create_user("vera")
    user_set_role(user=user, role="viewer")
    return user


def test_the_database_keeps_no_key(viewer: User) -> None:
    key = api_token_create(user=viewer)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        rows = cursor.fetchall()
    assert len(rows) == 1
    assert not any(key in str(value) for value in rows[0])
    token = ApiToken.objects.get()
    assert (token.prefix, token.digest) == (key[:8], api_key_digest(key))


def test_no_table_holds_a_key_the_command_printed(viewer: User) -> None:
    out = StringIO()
    call_command("apitoken", viewer.username, stdout=out)
    key = out.getvalue().strip()
    assert api_get(key).status_code == 200
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {quote(table)}")
            assert key not in repr(cursor.fetchall()), f"{table} holds the key"


def test_the_key_authenticates_its_user_and_marks_the_token_used(viewer: User) -> None:
    key = api_token_create(user=viewer)
    assert ApiToken.objects.get().last_used is None
    response = api_get(key)
    assert response.status_code == 200
    assert ApiToken.objects.get().last_used is not None


def test_last_used_is_written_at_most_once_a_minute(viewer: User) -> None:
    key = api_token_create(user=viewer)
    api_get(key)
    with CaptureQueriesContext(connection) as queries:
        api_get(key)
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    ApiToken.objects.update(last_used=timezone.now() - timedelta(minutes=2))
    api_get(key)
    assert timezone.now() - ApiToken.objects.get().last_used < timedelta(minutes=1)


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda key: key[:-1] + ("0" if key[-1] != "0" else "1"), id="one-digit-off"),
        pytest.param(api_key_digest, id="the-stored-digest"),
        pytest.param(lambda key: key[:8], id="the-prefix"),
        pytest.param(lambda key: "", id="empty"),
    ],
)
def test_a_wrong_key_is_refused_with_401(viewer: User, wrong: Any) -> None:
    key = api_token_create(user=viewer)
    response = api_get(wrong(key))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"


def test_an_inactive_users_key_is_refused(viewer: User) -> None:
    key = api_token_create(user=viewer)
    viewer.is_active = False
    viewer.save()
    assert api_get(key).status_code == 401


def test_rotation_invalidates_the_old_key(viewer: User) -> None:
    old = api_token_create(user=viewer)
    new = api_token_rotate(user=viewer)
    assert api_get(old).status_code == 401
    assert api_get(new).status_code == 200
    assert ApiToken.objects.filter(user=viewer).count() == 1


def test_a_second_token_is_refused_and_the_first_keeps_working(viewer: User) -> None:
    key = api_token_create(user=viewer)
    with pytest.raises(ApiTokenExists):
        api_token_create(user=viewer)
    assert api_get(key).status_code == 200


def test_keys_are_40_hex_digits_and_differ(viewer: User) -> None:
    keys = {api_token_rotate(user=viewer) for _ in range(5)}
    assert len(keys) == 5
    assert all(len(key) == 40 and int(key, 16) >= 0 for key in keys)


def test_a_kept_key_is_printed_again_while_it_is_the_users_token(
    viewer: User, tmp_path: Any
) -> None:
    """bin/run shows the embedded admin's token at every start: `apitoken --keep FILE`."""
    kept = tmp_path / "api-token"

    def keep() -> str:
        out = StringIO()
        call_command("apitoken", viewer.username, "--keep", str(kept), stdout=out)
        return out.getvalue().strip()

    first = keep()
    assert kept.stat().st_mode & 0o777 == 0o600
    assert keep() == first  # the same key, still working
    assert api_get(first).status_code == 200
    api_token_rotate(user=viewer)  # replaced elsewhere (the account page): the kept key is dead
    renewed = keep()
    assert renewed != first
    assert api_get(renewed).status_code == 200
    assert kept.read_text().strip() == renewed
