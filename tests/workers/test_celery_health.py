"""Worker health with real workers: a started worker listens within a heartbeat of being ready,
a terminated one is gone at once, a killed one (kill -9) once the staleness has passed; on
PostgreSQL with Redis, and on SQLite with the embedded broker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from celery.worker import state as worker_state
from django.contrib.auth.models import User
from django.test import Client

from tests.celery_worker import WorkerProcess, wait_until
from tests.webapp.factories import VantagePointFactory
from tests.webapp.sites.conftest import login_as
from tests.workers.test_celery_embedded import embedded_env, manage  # noqa: F401
from webapp.campaigns.dispatch import MEASURE_RUN, REAP_RUNS
from webapp.campaigns.health import VantagePointHealth, vantage_points_health
from webapp.celery import _current_run_id
from webapp.sites.models import VantagePoint, WorkerHeartbeat

HEARTBEAT_S = 1
STALE_S = 3
FAST = {"FEDPROBE_WORKER_HEARTBEAT_S": str(HEARTBEAT_S), "FEDPROBE_WORKER_STALE_S": str(STALE_S)}


@pytest.fixture
def short_staleness(settings: Any) -> None:
    settings.FEDPROBE_WORKER_STALE_S = STALE_S


def health(vantage_point: VantagePoint) -> VantagePointHealth:
    return vantage_points_health(vantage_points=[vantage_point])[vantage_point.pk]


def vantage_points_page() -> str:
    viewer = User.objects.filter(username="health-viewer").first()
    client = login_as("health-viewer", "viewer") if viewer is None else Client()
    client.force_login(viewer or client.user)  # type: ignore[attr-defined]
    return client.get("/vantage-points/").content.decode()


def warning_of(page: str, name: str) -> bool:
    row = page.split(f"<td>{name}", 1)[1].split("</tr>", 1)[0]
    return "No worker listening: runs will wait." in row


def test_a_started_worker_listens_within_a_heartbeat_and_is_gone_at_once_when_terminated(
    start_celery_worker: Callable[..., WorkerProcess], short_staleness: None
) -> None:
    cern = VantagePointFactory(name="health-cern")
    assert not health(cern).listening
    assert warning_of(vantage_points_page(), "health-cern")

    worker = start_celery_worker("health-cern", control=True, env=FAST)
    ready_at = time.monotonic()
    wait_until(lambda: health(cern).listening, HEARTBEAT_S + 2, "worker listening", worker)
    assert time.monotonic() - ready_at < HEARTBEAT_S + 2
    [seen] = health(cern).live_workers
    assert (seen.hostname, seen.version, seen.current_run_id) == (worker.hostname, "0.1.0", None)
    assert worker.process is not None and seen.pid == worker.process.pid
    queues = set(WorkerHeartbeat.objects.filter(hostname=worker.hostname).values_list("queue"))
    assert queues == {("vantage.health-cern",), ("control",)}
    page = vantage_points_page()
    assert not warning_of(page, "health-cern")
    assert f"<code>{worker.hostname}</code>" in page

    # Heartbeats go on: still listening well past the staleness.
    time.sleep(STALE_S + 1)
    assert health(cern).listening

    worker.stop()  # SIGTERM: a warm shutdown marks it stopped
    gone = health(cern)
    assert not gone.listening
    assert gone.workers[0].stopped_at is not None
    assert warning_of(vantage_points_page(), "health-cern")


@pytest.mark.faults
def test_a_killed_worker_is_gone_once_the_staleness_has_passed(
    start_celery_worker: Callable[..., WorkerProcess], short_staleness: None
) -> None:
    ral = VantagePointFactory(name="health-ral")
    worker = start_celery_worker("health-ral", env=FAST)
    wait_until(lambda: health(ral).listening, HEARTBEAT_S + 2, "worker listening", worker)
    worker.kill_host()  # kill -9 of all its processes: no shutdown, no last word
    killed_at = time.monotonic()
    last_seen = health(ral).last_seen
    assert health(ral).listening  # it cannot know yet
    wait_until(lambda: not health(ral).listening, STALE_S + 2, "killed worker gone")
    waited = time.monotonic() - killed_at
    # Gone because its heartbeat is stale (at most one heartbeat period before the kill).
    assert waited > STALE_S - HEARTBEAT_S - 0.5
    gone = health(ral)
    assert gone.last_seen == last_seen
    assert gone.workers[0].stopped_at is None
    assert warning_of(vantage_points_page(), "health-ral")


HEALTH_SCRIPT = """
import json
import django
django.setup()
from webapp.campaigns.health import vantage_points_health
from webapp.sites.models import VantagePoint
from webapp.celery import app

if SEND:
    app.send_task("fedprobe.measure_run", args=[0], queue="vantage.nobody")
local, _ = VantagePoint.objects.get_or_create(name="local")
nobody, _ = VantagePoint.objects.get_or_create(name="nobody")
health = vantage_points_health(vantage_points=[local, nobody], broker=True)
print(json.dumps({
    vp.name: {
        "listening": health[vp.pk].listening,
        "hostnames": [w.hostname for w in health[vp.pk].live_workers],
        "broker_messages": health[vp.pk].broker_messages,
    } for vp in (local, nobody)
}))
"""


def test_health_on_the_embedded_database_and_broker(
    embedded_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {**embedded_env, **FAST}
    manage(env, "migrate", "--noinput")
    worker = WorkerProcess("embedded", ["vantage.local", "control"], env, tmp_path / "w.log")

    def read(*, send: bool) -> dict[str, Any]:
        return json.loads(manage(env, script=f"SEND = {send}\n{HEALTH_SCRIPT}"))

    try:
        worker.start().wait_ready()
        time.sleep(HEARTBEAT_S)
        outcome = read(send=True)
        assert outcome["local"] == {
            "listening": True,
            "hostnames": [worker.hostname],
            "broker_messages": 0,
        }
        assert outcome["nobody"] == {"listening": False, "hostnames": [], "broker_messages": 1}
    finally:
        worker.stop()
    assert read(send=False)["local"]["listening"] is False
    assert (Path(env["FEDPROBE_VAR_DIR"]) / "fedprobe.sqlite3").exists()


def test_the_heartbeat_names_the_run_the_worker_is_measuring(monkeypatch: Any) -> None:
    measuring = SimpleNamespace(name=MEASURE_RUN, args=[42])
    other = SimpleNamespace(name=REAP_RUNS, args=[])
    monkeypatch.setattr(worker_state, "active_requests", [other, measuring])
    assert _current_run_id() == 42
    monkeypatch.setattr(worker_state, "active_requests", [other])
    assert _current_run_id() is None
