"""Settings for the test suite: webapp.settings against the real PostgreSQL and Redis.

pytest-django loads settings before any conftest runs, so the defaults are set here.
DATABASE_URL defaults to the local PostgreSQL (pytest-django creates and drops
test_fedprobe next to it); set but empty (bin/test's SQLite stage), it is the embedded
SQLite default, as in webapp.settings. The broker is always the test Redis DB
(FEDPROBE_TEST_BROKER_URL, default DB 13), never FEDPROBE_BROKER_URL: the test session
flushes it.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fedprobe")
os.environ["FEDPROBE_BROKER_URL"] = os.environ.get(
    "FEDPROBE_TEST_BROKER_URL", "redis://127.0.0.1:6379/13"
)

from webapp.settings import *  # noqa: F403
