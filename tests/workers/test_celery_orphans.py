"""A worker killed mid-run takes its clients with it: none goes on measuring beside the next
run (issue 10, item 4). Killed as `kill -9` kills it, not its whole session: orphans would
show."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db.models import F

from tests.celery_worker import WorkerProcess, session_members, wait_until
from tests.webapp.factories import CampaignFactory
from tests.workers.test_celery import lab_endpoint
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch
from webapp.sites.models import VantagePoint

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def measuring_run(lab: Any, vantage: str) -> Run:
    """16 clients of 1 KiB reads 2 ms away: ~30 s of measuring."""
    campaign = CampaignFactory(
        endpoints=[lab_endpoint(lab, "near-root")],
        vantage_points=[VantagePoint.objects.create(name=vantage)],
        read_sizes=[1024],
        fractions=[1.0],
        clients=[16],
    )
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    return run


def clients_of(worker: WorkerProcess) -> tuple[int, list[int]]:
    """(the pool process, the processes it started: the fork server and the clients)."""
    assert worker.process is not None
    members = session_members(worker.process.pid)
    pool = next(pid for pid in members if parent(pid) == worker.process.pid)
    return pool, [pid for pid in members if "forkserver" in cmdline(pid)]


@pytest.mark.parametrize("victim", ["pool process", "worker"])
def test_clients_die_with_their_worker_and_its_pool_process(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess], victim: str
) -> None:
    vantage = "orphans-" + victim.split(maxsplit=1)[0]
    worker = start_celery_worker(vantage)
    run = measuring_run(lab, vantage)
    wait_until(
        lambda: run.attempts.filter(heartbeat_at__gt=F("run__started_at")).exists(),
        30,
        "clients measuring",
        worker,
    )
    pool, measuring = clients_of(worker)
    assert len(measuring) >= 17  # the fork server and 16 clients
    assert worker.process is not None
    os.kill(pool if victim == "pool process" else worker.process.pid, signal.SIGKILL)
    if victim == "worker":
        os.kill(pool, signal.SIGKILL)  # kill -9 of the worker's main and pool processes
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in measuring) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in measuring if alive(pid)] == []
