"""PostgreSQL restarting mid-run: the worker beats on, ingests once, and the run ends final.

The restart needs a PostgreSQL of the test's own (the shared server is never restarted), so
this scenario runs entirely against a private cluster: migrated, filled and launched by
`manage.py` in subprocesses, measured by a real worker, checked with psycopg. The session's
pytest-django database is not used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.celery_worker import REPO, WorkerProcess, wait_until
from tests.servers import PostgresCluster

pytestmark = pytest.mark.faults

VANTAGE = "pg-restart"
FILE_16M = "/fedprobe/file-16M"
CLIENTS = 2
BANDWIDTH_MBPS = 1.0  # per connection: each client reads 16.8 MB in ~17 s

# Run by `manage.py shell` against the private database: a relayed endpoint, a campaign of
# one run on it from VANTAGE, launched (enqueued on commit); prints the run ids.
SCENARIO = """
import json, os
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint

spec = json.loads(os.environ["FEDPROBE_TEST_SCENARIO"])
site = Site.objects.create(name="slow-site")
endpoint = Endpoint.objects.create(
    site=site, name="slow-root", protocol="root", base_url=spec["base_url"]
)
TestFile.objects.create(
    endpoint=endpoint, path=spec["path"], size=spec["size"], adler32=spec["adler32"],
    is_default=True,
)
campaign = Campaign.objects.create(
    name="outage", methods=["direct"], patterns=["sequential"], read_sizes=[1048576],
    fractions=[1.0], clients=[spec["clients"]], deadline_s=300,
)
campaign.endpoints.set([endpoint])
campaign.vantage_points.set([VantagePoint.objects.create(name=spec["vantage"])])
runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
print(json.dumps([run.pk for run in runs]))
"""


@pytest.fixture
def private_postgres() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.start()
        cluster.create_database("fedprobe")
        yield cluster
    finally:
        cluster.stop()


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def query(url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows from a fresh connection (each call survives a restart in between)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def test_a_postgresql_restart_mid_run_keeps_the_heartbeat_and_stores_the_results_once(
    lab: Any,
    relay_to: Any,
    private_postgres: PostgresCluster,
    celery_broker_url: str,
    tmp_path: Path,
) -> None:
    database = private_postgres.url("fedprobe")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "DATABASE_URL": database,
        "FEDPROBE_BROKER_URL": celery_broker_url,
    }
    manage(env, "migrate", "--no-input")
    _, url = relay_to("local-root", FILE_16M, bandwidth_mbps=BANDWIDTH_MBPS)
    (lab_file,) = [f for f in lab.endpoint("local-root").files if f.path == FILE_16M]
    scenario = {
        "base_url": url.split("//fedprobe")[0] + "/",
        "path": FILE_16M,
        "size": lab_file.size,
        "adler32": lab_file.adler32,
        "clients": CLIENTS,
        "vantage": VANTAGE,
    }
    worker = WorkerProcess(VANTAGE, [f"vantage.{VANTAGE}"], env, tmp_path / "worker.log")
    try:
        worker.start().wait_ready()
        launched = manage(
            {**env, "FEDPROBE_TEST_SCENARIO": json.dumps(scenario)}, "shell", "-c", SCENARIO
        )
        (run_id,) = json.loads(launched.strip().splitlines()[-1])
        _restart_while_beating(private_postgres, database, run_id, worker)
    finally:
        worker.stop()

    ((status, errors),) = query(
        database, "SELECT status, errors FROM campaigns_run WHERE id = %s", run_id
    )
    assert status == "succeeded", errors
    attempts = query(
        database,
        "SELECT client, status, bytes_read FROM campaigns_clientattempt WHERE run_id = %s "
        "ORDER BY client",
        run_id,
    )
    assert attempts == [(i, "ok", lab_file.size) for i in range(CLIENTS)]


def _restart_while_beating(
    cluster: PostgresCluster, database: str, run_id: int, worker: WorkerProcess
) -> None:
    """Restart PostgreSQL once the clients beat, then wait for a beat after the restart
    (the heartbeat thread reconnected) while the run still runs, then for its end."""

    def last_beat() -> datetime | None:
        rows = query(
            database,
            "SELECT max(a.heartbeat_at) FROM campaigns_clientattempt a "
            "JOIN campaigns_run r ON r.id = a.run_id "
            "WHERE a.run_id = %s AND r.status = 'running' AND a.heartbeat_at > r.started_at",
            run_id,
        )
        return rows[0][0]

    wait_until(last_beat, 60, "clients beating", worker)
    before = query(database, "SELECT now()")[0][0]
    cluster.restart()
    wait_until(
        lambda: (beat := last_beat()) is not None and beat > before,
        15,
        "a heartbeat after the restart, while running",
        worker,
    )

    def final() -> bool:
        rows = query(database, "SELECT status FROM campaigns_run WHERE id = %s", run_id)
        return rows[0][0] not in {"queued", "running"}

    wait_until(final, 90, f"run {run_id} final", worker)
