"""Campaign workflows against PostgreSQL and the real lab: launch, execute, ingest, reap."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import XRootD.client
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
)
from webapp.campaigns.metrics import RUN_METRICS
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.selectors import run_json
from webapp.campaigns.services import (
    campaign_launch,
    campaign_preview,
    run_cancel,
    run_claim,
    run_execute,
    run_ingest,
    runs_reap,
)
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db


def lab_endpoint(lab: Any, name: str) -> Endpoint:
    lab_register(lab=lab)
    return Endpoint.objects.get(name=name)


def test_launch_creates_one_run_per_cell_and_enqueues_after_commit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    endpoints = [TestFileFactory().endpoint, TestFileFactory().endpoint]
    campaign = CampaignFactory(
        endpoints=endpoints, patterns=["random", "async"], clients=[1, 4], repetitions=3
    )
    with django_capture_on_commit_callbacks() as callbacks:
        runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.API)
    assert len(runs) == 2 * 2 * 2 * 3 == Run.objects.count()
    assert {r.status for r in runs} == {Run.Status.QUEUED}
    assert len(callbacks) == 1  # one enqueue callback, run only once the rows are committed
    assert campaign_preview(campaign=campaign).runs == 24


def test_rolled_back_launch_creates_and_enqueues_nothing(
    django_capture_on_commit_callbacks: Any,
) -> None:
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint])

    def launch_then_fail() -> None:
        with transaction.atomic():
            campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
            raise RuntimeError("rolled back")

    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(RuntimeError):
        launch_then_fail()
    assert callbacks == []
    assert Run.objects.count() == 0


def test_launch_over_the_matrix_cap_is_refused_and_creates_nothing(settings: Any) -> None:
    settings.FEDPROBE_MAX_MATRIX = 3
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint], clients=[1, 2, 4, 8])
    with pytest.raises(ValidationError) as caught:
        campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    assert "matrix" in caught.value.message_dict
    assert Run.objects.count() == 0


def test_preview_counts_planned_bytes_whole_files_for_copies() -> None:
    test_file = TestFileFactory(size=1000)
    campaign = CampaignFactory(
        endpoints=[test_file.endpoint], methods=["direct", "copy"], fractions=[0.1], clients=[2]
    )
    assert campaign_preview(campaign=campaign).planned_bytes == 2 * 100 + 2 * 1000


def test_execute_measures_a_lab_endpoint_and_stores_the_results(lab: Any) -> None:
    endpoint = lab_endpoint(lab, "local-root")
    campaign = CampaignFactory(endpoints=[endpoint], clients=[3])
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.errors
    assert run.worker == "test@host"
    assert run.bytes_read == 3 * run.result["bytes_read"] // 3 > 0
    assert run.throughput_mbps > 0 and run.latency_p50_us > 0
    for metric in RUN_METRICS:  # each stored from its place in the run JSON
        assert getattr(run, metric.name) == metric.from_run_json(run.result) is not None
    assert run.served_by == [endpoint.base_url.split("://")[1].strip("/")]
    # The client the run read with, as the XRootD bindings report their version: in the run
    # JSON, on the run, and in the API's run detail.
    bindings = f"xrootd {XRootD.client.__version__} (Python bindings)"
    assert run.result["client_version"] == run.client_version == bindings
    assert run_json(run)["client_version"] == bindings
    attempts = list(run.attempts.all())
    assert [a.client for a in attempts] == [0, 1, 2]
    assert {a.status for a in attempts} == {ClientAttempt.Status.OK}
    assert all(a.record["bytes_read"] == a.bytes_read > 0 for a in attempts)


def test_duplicate_ingestion_stores_one_result(lab: Any) -> None:
    endpoint = lab_endpoint(lab, "local-root")
    (run,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[endpoint]), trigger=Run.Trigger.MANUAL
    )
    run_execute(run_id=run.pk, worker="w")
    run.refresh_from_db()
    replay = {**run.result, "clients": [a.record for a in run.attempts.all()]}
    assert run_ingest(run_id=run.pk, run_json=replay) is False
    assert run.attempts.count() == 2
    assert Run.objects.get(pk=run.pk).finished_at == run.finished_at


def test_an_ingestion_that_fails_halfway_stores_nothing(lab: Any) -> None:
    """Atomic: the attempts are written first, the aggregates last; a failure in between
    (here a malformed figure) leaves the run running with its attempts untouched, for the
    retry or the reaper (issue 10, "ingestion is atomic")."""
    endpoint = lab_endpoint(lab, "local-root")
    (run,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[endpoint], clients=[2]), trigger=Run.Trigger.MANUAL
    )
    run_execute(run_id=run.pk, worker="w")
    run.refresh_from_db()
    records = [a.record for a in run.attempts.all()]
    (again,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[endpoint], clients=[2]), trigger=Run.Trigger.MANUAL
    )
    assert run_claim(run_id=again.pk, worker="w") is not None
    broken = {**run.result, "clients": records, "wall_s": "not a number"}
    with pytest.raises(ValueError, match="expected a number"):
        run_ingest(run_id=again.pk, run_json=broken)
    again.refresh_from_db()
    assert (again.status, again.finished_at, again.wall_s) == (Run.Status.RUNNING, None, None)
    statuses = set(again.attempts.values_list("status", "record"))
    assert statuses == {(ClientAttempt.Status.RUNNING, None)}
    assert run_ingest(run_id=again.pk, run_json={**broken, "wall_s": run.wall_s}) is True


def test_a_run_is_claimed_once() -> None:
    (run,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[TestFileFactory().endpoint]), trigger=Run.Trigger.MANUAL
    )
    assert run_claim(run_id=run.pk, worker="a") is not None
    assert run_claim(run_id=run.pk, worker="b") is None
    assert Run.objects.get(pk=run.pk).worker == "a"
    assert ClientAttempt.objects.filter(run=run).count() == run.clients


def test_cancelled_queued_run_is_final_and_never_executes() -> None:
    (run,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[TestFileFactory().endpoint]), trigger=Run.Trigger.MANUAL
    )
    assert run_cancel(run=run).status == Run.Status.CANCELLED
    run_execute(run_id=run.pk, worker="w")
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    assert not ClientAttempt.objects.filter(run=run).exists()


def test_reaper_ends_runs_whose_heartbeats_stopped_once() -> None:
    (run,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[TestFileFactory().endpoint]), trigger=Run.Trigger.MANUAL
    )
    run_claim(run_id=run.pk, worker="gone")
    assert runs_reap(stale_after_s=60) == 0  # beating recently: left alone
    ClientAttempt.objects.filter(run=run).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert runs_reap(stale_after_s=60) == 1
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert set(run.attempts.values_list("status", flat=True)) == {ClientAttempt.Status.LOST}
    assert runs_reap(stale_after_s=60) == 0


def test_hanging_endpoint_ends_as_timeout(lab: Any, relay_to: Any) -> None:
    host, url = relay_to("local-root", "/fedprobe/file-16M")
    host.set_mode("test", "hang")
    base = url.split("//fedprobe")[0] + "/"
    test_file = TestFileFactory(endpoint=EndpointFactory(base_url=base), path="/fedprobe/file-16M")
    campaign = CampaignFactory(endpoints=[test_file.endpoint], deadline_s=3)
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    run_execute(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert run.status == Run.Status.TIMEOUT
    assert run.throughput_mbps is None  # no figures from a run that measured nothing


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_run_and_keeps_it_out_of_aggregates(lab: Any) -> None:
    endpoint = lab_endpoint(lab, "near-root")
    run = RunFactory(test_file=endpoint.default_file, read_size=1024, fraction=1.0)

    def execute() -> None:
        try:
            run_execute(run_id=run.pk, worker="w")
        finally:
            connection.close()  # this thread's own connection

    worker = threading.Thread(target=execute)
    worker.start()
    while Run.objects.get(pk=run.pk).status == Run.Status.QUEUED:
        time.sleep(0.05)
    time.sleep(1.0)
    started = time.monotonic()
    run_cancel(run=run)
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert time.monotonic() - started < 10
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.throughput_mbps is None
    assert set(run.attempts.values_list("status", flat=True)) == {ClientAttempt.Status.CANCELLED}
