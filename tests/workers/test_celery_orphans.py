"""A worker killed mid-run: its clients die with it, none goes on measuring beside the next
run (issue 10, item 4; killed as `kill -9` kills it, not its whole session, so orphans would
show), and the clients that had ended are kept (item 3)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.db.models import F

from tests.celery_worker import WorkerProcess, session_members, wait_until
from tests.webapp.factories import CampaignFactory
from tests.workers.test_celery import lab_endpoint
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import campaign_launch, runs_reap
from webapp.sites.models import Endpoint, VantagePoint
from workers.lab.relay import RelayHost, RelaySpec

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


def test_clients_that_ended_before_their_worker_died_are_kept_and_the_run_is_partial(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    """8 clients read 16 MiB each through a relay (2 ms) that hangs as soon as the first of
    them has ended (its connection closed): the others hang mid-read; the worker is killed;
    the reaper ends the run partial with the records of those that ended (issue 10, item 3)."""
    clients = 8
    with relayed_local_root(lab, rtt_ms=2.0) as (relay, endpoint):
        vantage = "partial"
        worker = start_celery_worker(vantage)
        campaign = CampaignFactory(
            endpoints=[endpoint],
            vantage_points=[VantagePoint.objects.create(name=vantage)],
            methods=["direct"],
            patterns=["sequential"],
            read_sizes=[64 * 1024],
            fractions=[1.0],
            clients=[clients],
            deadline_s=600.0,
        )
        campaign.test_files.set([endpoint.files.get(path="/fedprobe/file-16M")])
        hang_after_the_first_ends(relay, clients)
        (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)

        def some_ended_while_running() -> bool:
            ended = run.attempts.filter(status=ClientAttempt.Status.OK).exists()
            return ended and Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists()

        wait_until(some_ended_while_running, 60, "a client's record stored as it ended", worker)
        worker.kill_host()
        wait_until(lambda: runs_reap(stale_after_s=3), 30, "reaped")
    run.refresh_from_db()
    assert run.status == Run.Status.PARTIAL
    kept = run.attempts.filter(status=ClientAttempt.Status.OK)
    assert 1 <= kept.count() < clients
    assert all(a.record["bytes_read"] == 16 * 1024 * 1024 for a in kept)
    lost = run.attempts.filter(status=ClientAttempt.Status.LOST).count()
    assert lost == clients - kept.count()


def hang_after_the_first_ends(relay: RelayHost, clients: int) -> None:
    """Hang the relay once all clients were connected and one connection has closed."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        peak = 0
        while time.monotonic() < deadline:
            open_now = relay.stats()["test"].connections_open
            peak = max(peak, open_now)
            # Most clients connected (a slow poll may miss the very peak), and one has gone.
            if peak >= clients // 2 and open_now < peak:
                relay.set_mode("test", "hang")
                return
            time.sleep(0.001)

    threading.Thread(target=watch, daemon=True).start()


def test_after_a_hang_the_same_worker_and_the_web_process_measure_the_endpoint_again(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    """Issue 10, item 1: one XRootD endpoint hangs (a run ends timeout), recovers; the next
    run in the same pool process, and Test connection in this (long-lived) process, succeed.
    The relay keeps its port throughout, as a real endpoint keeps its address."""
    from webapp.sites.services import endpoint_test_connection

    with relayed_local_root(lab) as (relay, endpoint):
        vantage = "recovers"
        worker = start_celery_worker(vantage)
        campaign = CampaignFactory(
            endpoints=[endpoint],
            vantage_points=[VantagePoint.objects.create(name=vantage)],
            methods=["direct"],
            patterns=["random"],
            read_sizes=[4096],
            fractions=[0.01],
            clients=[2],
            deadline_s=5.0,
        )
        relay.set_mode("test", "hang")
        (hung,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
        assert not endpoint_test_connection(endpoint=endpoint).ok
        wait_until(lambda: final(hung), 60, "the hung run ended", worker)
        relay.set_mode("test", "normal")
        (again,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
        wait_until(lambda: final(again), 60, "the run after the hang", worker)
        check = endpoint_test_connection(endpoint=endpoint)
    hung.refresh_from_db()
    again.refresh_from_db()
    assert hung.status in (Run.Status.TIMEOUT, Run.Status.FAILED), hung.errors
    assert again.status == Run.Status.SUCCEEDED, again.errors
    assert again.worker == hung.worker
    assert check.ok, (check.error_class, check.message)


def final(run: Run) -> bool:
    return Run.objects.filter(pk=run.pk, status__in=Run.FINAL).exists()


@contextlib.contextmanager
def relayed_local_root(lab: Any, rtt_ms: float = 0.0) -> Iterator[tuple[RelayHost, Endpoint]]:
    """The lab's local-root endpoint registered behind a relay of the test's own (one port
    throughout, as a real endpoint keeps its address)."""
    target = urlsplit(lab.endpoint("local-root").url)
    assert target.hostname is not None and target.port is not None
    relay = RelayHost([RelaySpec("test", 0, target.hostname, target.port, rtt_ms=rtt_ms)])
    relay.start()
    try:
        endpoint = lab_endpoint(lab, "local-root")
        endpoint.base_url = f"root://127.0.0.1:{relay.relay('test').port}/"
        endpoint.save()
        yield relay, endpoint
    finally:
        relay.stop()
