"""The test process's PostgreSQL backend: Django's, with a cheaper flush (tests/settings.py).

A transactional test (transactional_db, live_server, a real Celery worker) ends with
`manage.py flush`, which Django's backend does with one TRUNCATE of every table: PostgreSQL
then makes new files for each table and index and drops the old ones at commit, about a
second at load 10 for a few rows. DELETE of the rows does the same for these tables in
milliseconds; Django's foreign keys are DEFERRABLE INITIALLY DEFERRED, so the order of the
deletes does not matter. The content types and permissions are kept: the flush's
post_migrate would only make them again (another second), and nothing in the project gives
a permission. A flush that resets sequences or cascades stays Django's TRUNCATE. The
workers and subprocesses the tests start use webapp.settings, Django's backend.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, operations

# What post_migrate makes again after every flush; the same rows each time.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})


class DatabaseOperations(operations.DatabaseOperations):
    def sql_flush(
        self,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade:
            return super().sql_flush(
                style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        deleted = sorted(set(tables) - KEPT_TABLES)
        if not deleted:
            return []
        return [
            "SET CONSTRAINTS ALL DEFERRED;",
            *(f"DELETE FROM {self.quote_name(table)};" for table in deleted),
        ]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
