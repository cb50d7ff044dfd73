"""Redis restarting mid-campaign: the running run still ends and is stored once (results go
to PostgreSQL, not Redis), the worker reconnects and measures the runs sent after it.

The restart needs a Redis of the test's own (the shared server is never restarted), without
persistence: its restart loses the messages still queued, as a Redis without AOF does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from tests.celery_worker import WorkerProcess, wait_until
from tests.servers import RedisServer, celery_sends_to
from tests.webapp.factories import CampaignFactory, EndpointFactory, TestFileFactory
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import campaign_launch, runs_resend_stale
from webapp.sites.models import VantagePoint

pytestmark = pytest.mark.faults

VANTAGE = "redis-restart"
FILE_4M = "/fedprobe/file-4M"
CLIENTS = 2
RUNS = 3
BANDWIDTH_MBPS = 0.5  # per connection: a run reads 4.2 MB per client in ~8 s


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of the test's own, which this process's Celery app sends to meanwhile."""
    server = RedisServer(tmp_path / "redis.log").start()
    try:
        with celery_sends_to(server.url()):
            yield server
    finally:
        server.stop()


def test_a_redis_restart_mid_campaign_loses_no_result_and_counts_none_twice(
    lab: Any,
    relay_to: Any,
    private_broker: RedisServer,
    start_celery_worker: Callable[..., WorkerProcess],
) -> None:
    worker = start_celery_worker(VANTAGE, env={"FEDPROBE_BROKER_URL": private_broker.url()})
    _, url = relay_to("local-root", FILE_4M, bandwidth_mbps=BANDWIDTH_MBPS)
    (lab_file,) = [f for f in lab.endpoint("local-root").files if f.path == FILE_4M]
    endpoint = EndpointFactory(base_url=url.split("//fedprobe")[0] + "/")
    TestFileFactory(endpoint=endpoint, path=FILE_4M, size=lab_file.size, adler32=lab_file.adler32)
    campaign = CampaignFactory(
        endpoints=[endpoint],
        vantage_points=[VantagePoint.objects.create(name=VANTAGE)],
        patterns=["sequential"],
        read_sizes=[1024 * 1024],
        fractions=[1.0],
        clients=[CLIENTS],
        repetitions=RUNS,
    )
    launched = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    assert _queued_messages(private_broker) == RUNS - 1  # the worker holds one

    first = _restart_broker_mid_run(private_broker, worker)
    wait_until(lambda: Run.objects.get(pk=first).status in Run.FINAL, 60, "first run final", worker)
    # The messages of the runs still queued died with the broker: the resend pass (run by
    # beat every minute) sends them again once the vantage point has been idle long enough.
    later = sorted(run.pk for run in launched if run.pk != first)
    assert set(Run.objects.filter(pk__in=later).values_list("status", flat=True)) == {"queued"}
    idle_long_enough = timezone.now() + timedelta(seconds=settings.FEDPROBE_RESEND_AFTER_S)
    assert runs_resend_stale(now=idle_long_enough).resent == later

    ids = [run.pk for run in launched]
    wait_until(
        lambda: Run.objects.filter(pk__in=ids, status__in=Run.FINAL).count() == RUNS,
        30 * RUNS,
        "every run final",
        worker,
    )
    runs = Run.objects.filter(pk__in=ids)
    assert {(run.status, run.worker) for run in runs} == {
        (Run.Status.SUCCEEDED, worker.hostname)
    }, [run.errors for run in runs]
    attempts = ClientAttempt.objects.filter(run__in=ids)
    assert sorted(attempts.values_list("run_id", "client")) == [
        (run_id, client) for run_id in sorted(ids) for client in range(CLIENTS)
    ]
    assert set(attempts.values_list("status", "bytes_read")) == {
        (ClientAttempt.Status.OK, lab_file.size)
    }


def _restart_broker_mid_run(server: RedisServer, worker: WorkerProcess) -> int:
    """Kill and restart the broker once every client of the worker's run is reading; the
    id of that run, still running after the restart."""

    def running() -> Run | None:
        run = Run.objects.filter(status=Run.Status.RUNNING).first()
        return run if run and run.attempts.filter(bytes_read__gt=0).count() == CLIENTS else None

    wait_until(running, 60, "a run measuring", worker)
    run = running()
    assert run is not None
    server.kill()
    server.start()
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    return run.pk


def _queued_messages(server: RedisServer) -> int:
    client = redis.Redis.from_url(server.url())
    try:
        return int(client.llen(f"vantage.{VANTAGE}"))
    finally:
        client.close()
