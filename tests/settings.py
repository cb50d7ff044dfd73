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
# Under pytest-xdist (bin/test's quick stage) each worker process is a session of its own,
# with its own test database (pytest-django adds the worker's name) and its own Celery
# worker: it gets its own broker DB too, the next ones after the configured one, or its
# Celery worker would take the other session's tasks (and each session flushes its DB).
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker.startswith("gw"):
    _base, _, _db = os.environ["FEDPROBE_BROKER_URL"].rpartition("/")
    os.environ["FEDPROBE_BROKER_URL"] = f"{_base}/{(int(_db or 0) + int(_xdist_worker[2:])) % 16}"

from django.conf import global_settings  # noqa: E402 (after the environment it reads)

from webapp.settings import *  # noqa: E402, F403

# Django's fast hasher first in the test process (Django's own advice for test suites): the
# production default (PBKDF2, a million rounds, ~0.3 s of CPU a password) would hash every
# test user's password again, and hashing is no part of what those tests check. The
# production hashers stay listed, so hashes made by subprocesses on webapp.settings still
# verify; tests/webapp/accounts/test_login.py signs in with the production list itself.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]

# Transactional tests end with a flush: on PostgreSQL, the test process's backend deletes the
# rows instead of truncating every table (tests/postgresql_backend/base.py).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    DATABASES["default"]["ENGINE"] = "tests.postgresql_backend"  # noqa: F405
