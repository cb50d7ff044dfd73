"""Fixtures for the whole suite: the lab federation, real servers on loopback.

The session's lab runs the test profile (near 2 ms, far 10 ms) with files of 1, 4 and
16 MiB on a free block of ports, in a fresh dir under /tmp, and stops when the session ends.
For quick loops, reuse a lab you keep running:

    python -m workers.lab up --dir /tmp/dev-lab --file-size 1M --file-size 4M --file-size 16M
    FEDPROBE_TEST_LAB_DIR=/tmp/dev-lab pytest tests/workers/engine
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.celery_worker import REAPER_ENV, WorkerProcess, database_url, stop_workers
from workers.lab import Lab
from workers.lab.errors import PortTaken
from workers.lab.files import MiB
from workers.lab.ports import free_base_port

# Fixtures of the remote vantage point tests: a RabbitMQ virtual host, the central settings.
pytest_plugins = ["tests.rabbitmq"]

TEST_FILE_SIZES = (1 * MiB, 4 * MiB, 16 * MiB)
_PORT_TRIES = 3
_BROWSER_TESTS = Path(__file__).parent / "browser"


def pytest_configure(config: pytest.Config) -> None:
    """The live server (pytest-django's live_server: Django's LiveServerThread) sends without
    Nagle's delay, as gunicorn does in production. Django's server writes an answer's
    headers and body separately, and the second write waited for the client's delayed
    acknowledgement of the first: about 45 ms an answer on a kept-alive connection (a
    browser's, a requests.Session's), 14 ms instead of 59 ms a page at load 11."""
    from django.core.servers.basehttp import ThreadedWSGIServer
    from django.test.testcases import LiveServerThread

    class NoDelayServer(ThreadedWSGIServer):
        def get_request(self) -> tuple[socket.socket, object]:
            connection, address = super().get_request()
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connection, address

    LiveServerThread.server_class = NoDelayServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/browser `browser`, so `pytest -m browser` selects them
    (a `pytestmark` in a conftest marks nothing: pytest reads it from test modules only)."""
    for item in items:
        if item.path.is_relative_to(_BROWSER_TESTS):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On the SQLite stage, a test marked `sqlite` that skips for any reason but
    only_on_postgresql's fails: the stage must run what it names, not skip it."""
    report = yield
    if report.skipped and item.get_closest_marker("sqlite") is not None:
        from django.db import connection

        from tests.webapp.sqlite import POSTGRESQL_ONLY_REASON

        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        if connection.vendor == "sqlite" and reason != f"Skipped: {POSTGRESQL_ONLY_REASON}":
            report.outcome = "failed"
            report.longrepr = f"marked sqlite, but skipped on the SQLite stage: {reason}"
    return report


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    reuse = os.environ.get("FEDPROBE_TEST_LAB_DIR")
    if reuse and Lab(Path(reuse)).is_running():
        yield Lab(Path(reuse))
        return
    state_dir = Path(tempfile.mkdtemp(prefix="fedprobe-test-lab-", dir="/tmp"))
    try:
        started = _start_lab(state_dir)
        try:
            yield started
        finally:
            started.down()
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def _start_lab(state_dir: Path, **options: Any) -> Lab:
    """Start a lab on a free port block, trying another block if one gets taken meanwhile."""
    options.setdefault("file_sizes", TEST_FILE_SIZES)
    for attempt in range(_PORT_TRIES):
        lab = Lab(state_dir, base_port=free_base_port(), **options)
        lab.progress = None
        try:
            lab.up()
        except PortTaken:
            if attempt == _PORT_TRIES - 1:
                raise
            continue
        return lab
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def paper_lab() -> Iterator[Lab]:
    """A lab of the paper profile (near site 26 ms away behind an 8 MB/s link), for the tests
    that reproduce the papers' numbers and the advice drawn from them; started on first use,
    once per session (the session's `lab` is the test profile's, with no caps)."""
    state_dir = Path(tempfile.mkdtemp(prefix="fedprobe-paper-lab-", dir="/tmp"))
    state_dir.chmod(0o755)
    try:
        started = _start_lab(state_dir, profile="paper")
        try:
            yield started
        finally:
            started.down()
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> None:
    """pytest-django's test database, then, on PostgreSQL, no content types and permissions
    made again after each transactional test's flush: the test backend's flush keeps them
    (tests/postgresql_backend), so its post_migrate would only look every one up again
    (some 40 queries, 0.5-1.3 s at load 14). Their two receivers are disconnected for the
    session once the database is made; the flush of the SQLite stage still needs them."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.db import connection
    from django.db.models.signals import post_migrate

    if connection.settings_dict["ENGINE"] == "tests.postgresql_backend":
        post_migrate.disconnect(
            create_permissions, dispatch_uid="django.contrib.auth.management.create_permissions"
        )
        post_migrate.disconnect(create_contenttypes)


@pytest.fixture(scope="session")
def celery_broker_url() -> Iterator[str]:
    """The session's Redis DB (tests/settings.py), flushed when the session starts and ends."""
    import redis
    from django.conf import settings

    url = str(settings.CELERY_BROKER_URL)
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def celery_worker_env(django_db_setup: None, celery_broker_url: str) -> dict[str, str]:
    """Environment of worker and beat processes: the test database pytest-django made, the
    test broker, and a reaper that needs seconds, not a minute (REAPER_ENV)."""
    from django.db import connection

    return {
        **os.environ,
        **REAPER_ENV,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "DATABASE_URL": database_url(connection.settings_dict),
        "FEDPROBE_BROKER_URL": celery_broker_url,
    }


@pytest.fixture(scope="session")
def _session_celery_worker(
    celery_worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    log = tmp_path_factory.mktemp("celery") / "local.log"
    worker = WorkerProcess("local", ["vantage.local", "control"], celery_worker_env, log)
    try:
        yield worker.start().wait_ready()
    finally:
        worker.stop()


@pytest.fixture
def celery_worker(transactional_db: None, _session_celery_worker: WorkerProcess) -> WorkerProcess:
    """A real worker (shared by the session) measuring from vantage point "local" and running
    control tasks. Tests using it commit their rows (transactional_db) so that it sees them."""
    return _session_celery_worker


@pytest.fixture
def start_celery_worker(
    transactional_db: None, celery_worker_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """start_celery_worker(vantage, control=False, env={}, wait=True, concurrency=1): a worker
    of the test's own on queue vantage.<vantage> (and control), stopped when the test ends."""
    workers: list[WorkerProcess] = []

    def start(
        vantage: str,
        *,
        control: bool = False,
        env: Mapping[str, str] | None = None,
        wait: bool = True,
        concurrency: int = 1,
    ) -> WorkerProcess:
        name = f"{vantage}-{len(workers)}"
        queues = [f"vantage.{vantage}", *(["control"] if control else [])]
        log = tmp_path / f"celery-{name}.log"
        environment = {**celery_worker_env, **(env or {})}
        worker = WorkerProcess(name, queues, environment, log, concurrency=concurrency)
        workers.append(worker)
        worker.start()
        return worker.wait_ready() if wait else worker

    yield start
    stop_workers(workers)


@pytest.fixture(autouse=True)
def _role_groups(request: pytest.FixtureRequest) -> None:
    """Give every database test the role groups. Migration 0001_roles makes them, but a
    transactional test ends by flushing every table, so tests after it would find none."""
    if request.node.get_closest_marker("django_db") is None and not (
        {"db", "transactional_db", "live_server"} & set(request.fixturenames)
    ):
        return
    request.getfixturevalue("transactional_db" if _transactional(request) else "db")
    from django.contrib.auth.models import Group

    from webapp.accounts.roles import ROLES

    for role in ROLES:
        Group.objects.get_or_create(name=role)


def _transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and marker.kwargs.get("transaction"):
        return True
    return bool({"transactional_db", "live_server"} & set(request.fixturenames))
