"""Migration accounts.0002_apitoken: a DRF token of an older version (its key in clear in
authtoken_token) keeps working, stored as a digest; DRF's table and migrations are gone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from webapp.accounts.models import ApiToken, api_key_digest
from webapp.accounts.services import user_set_role

pytestmark = pytest.mark.django_db(transaction=True)

DRF_KEY = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
DRF_CREATED = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
DRF_MIGRATIONS = (
    "0001_initial",
    "0002_auto_20160226_1747",
    "0003_tokenproxy",
    "0004_alter_tokenproxy_options",
)


def migrate(target: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(target or executor.loader.graph.leaf_nodes())


@pytest.fixture
def before_hashing() -> Iterator[None]:
    """The database as the version before left it: accounts at 0001, DRF's table there."""
    migrate([("accounts", "0001_roles")])
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {quote('authtoken_token')} ({quote('key')} varchar(40) PRIMARY KEY, "
            f"{quote('created')} timestamp with time zone NOT NULL, "
            f"{quote('user_id')} integer NOT NULL UNIQUE REFERENCES {quote('auth_user')} (id))"
        )
    for name in DRF_MIGRATIONS:
        MigrationRecorder(connection).record_applied("authtoken", name)
    try:
        yield
    finally:
        migrate()
        if "authtoken_token" in connection.introspection.table_names():
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE {quote('authtoken_token')}")


def test_a_drf_key_keeps_working_and_is_no_longer_stored(before_hashing: None) -> None:
    user = User.objects.create_user("legacy")
    user_set_role(user=user, role="viewer")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [DRF_KEY, connection.ops.adapt_datetimefield_value(DRF_CREATED), user.pk],
        )

    migrate()

    token = ApiToken.objects.get()
    assert (token.user_id, token.prefix, token.created) == (user.pk, DRF_KEY[:8], DRF_CREATED)
    assert token.digest == api_key_digest(DRF_KEY)
    answer = Client().get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token {DRF_KEY}")
    assert answer.status_code == 200
    assert "authtoken_token" not in connection.introspection.table_names()
    assert not MigrationRecorder(connection).migration_qs.filter(app="authtoken").exists()


def test_a_database_that_never_had_drf_tokens_migrates_too() -> None:
    migrate([("accounts", "0001_roles")])
    migrate()
    assert ApiToken._meta.db_table in connection.introspection.table_names()
