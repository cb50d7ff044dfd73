"""Shared by the web application's benchmarks: Django on a PostgreSQL database of their own.

The database is DATABASE_URL if set, else postgres://postgres@127.0.0.1:5432/fedprobe_bench,
created if missing and migrated. Benchmarks never touch the application's own database
unless DATABASE_URL names it.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path
from urllib.parse import urlparse

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/fedprobe_bench"
ROOT = Path(__file__).resolve().parent.parent


def setup_django(*, broker_url: str | None = None) -> None:
    """Point Django at the benchmark database (creating and migrating it) and set it up."""
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if broker_url:
        os.environ["FEDPROBE_BROKER_URL"] = broker_url
    sys.path.insert(0, str(ROOT))
    _create_database(os.environ["DATABASE_URL"])

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _create_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl().replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def percentiles_ms(samples_s: list[float]) -> dict[str, float]:
    """p50, p95, max of durations in seconds, as milliseconds."""
    ordered = sorted(samples_s)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50": statistics.median(ordered) * 1e3,
        "p95": p95 * 1e3,
        "max": ordered[-1] * 1e3,
    }
