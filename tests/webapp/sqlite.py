"""The SQLite stage: tests marked `sqlite` also run on the embedded SQLite default (the
database a new user meets first), in a pytest session of its own that bin/test starts with
an empty DATABASE_URL (by hand: `DATABASE_URL= pytest -m sqlite`). There a marked test may
only skip as `only_on_postgresql` does (tests/conftest.py fails any other skip)."""

from __future__ import annotations

import pytest
from django.db import connection

POSTGRESQL_ONLY_REASON = "compares with PostgreSQL's percentile_cont"

# For the tests that compare PostgreSQL's own answer (percentile_cont) with ours: on SQLite
# there is nothing to compare with.
only_on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason=POSTGRESQL_ONLY_REASON
)
