"""The central side reaches a PostgreSQL on another host over verified TLS: DATABASE_URL's
sslmode and sslrootcert reach libpq (issue 17, item 10; docs/deployment.md). A private
PostgreSQL cluster with a certificate of a test CA; Django started as `manage.py shell`
would be, with nothing but DATABASE_URL pointing at it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.celery_worker import REPO
from tests.servers import PostgresCluster
from workers.lab.pki import LabPki

# The connection's own row of pg_stat_ssl: whether it is encrypted.
SHOW_TLS = (
    "from django.db import connection\n"
    "with connection.cursor() as c:\n"
    "    c.execute('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')\n"
    "    print('tls', c.fetchone()[0])\n"
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> LabPki:
    folder = tmp_path_factory.mktemp("pki")
    made = LabPki(folder / "pki", folder / "certs")
    made.ensure(None)
    return made


@pytest.fixture(scope="module")
def tls_postgres(pki: LabPki) -> Iterator[PostgresCluster]:
    cluster = PostgresCluster(tls=(pki.lab.host_cert, pki.lab.host_key)).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def django_shell(url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW_TLS],
        env={**env, "DATABASE_URL": url},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_verify_full_against_the_servers_ca_connects_encrypted(
    tls_postgres: PostgresCluster, pki: LabPki
) -> None:
    url = tls_postgres.url("postgres") + f"?sslmode=verify-full&sslrootcert={pki.lab.ca_cert}"
    done = django_shell(url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "tls True"
    plain = django_shell(tls_postgres.url("postgres") + "?sslmode=disable")
    assert plain.stdout.splitlines()[-1] == "tls False"  # what the check above could see


def test_a_server_certificate_of_another_ca_is_refused(
    tls_postgres: PostgresCluster, pki: LabPki
) -> None:
    url = tls_postgres.url("postgres") + f"?sslmode=verify-full&sslrootcert={pki.rogue.ca_cert}"
    done = django_shell(url)
    assert done.returncode != 0
    assert "certificate verify failed" in done.stderr


def test_an_unknown_database_url_option_is_refused_naming_it() -> None:
    done = django_shell("postgres://postgres@127.0.0.1:5432/postgres?sslmod=require")
    assert done.returncode != 0
    assert "DATABASE_URL option 'sslmod' is not one of" in done.stderr
