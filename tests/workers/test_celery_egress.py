"""The egress policy through real workers: a run on a metadata address fails at once with
class egress; a worker whose administrator allows no loopback refuses the lab."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import CampaignFactory, RunFactory, SiteFactory, TestFileFactory
from tests.workers.test_celery import lab_endpoint, wait_for_final
from webapp.campaigns.dispatch import enqueue_run
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch
from webapp.sites.models import Endpoint, VantagePoint


def test_a_run_on_a_metadata_address_fails_with_class_egress_before_connecting(
    celery_worker: WorkerProcess,
) -> None:
    # Written straight to the database: the API and the forms would refuse this endpoint.
    endpoint = Endpoint.objects.create(
        site=SiteFactory(), name="metadata", protocol="root", base_url="root://169.254.169.254:1094"
    )
    run = RunFactory(test_file=TestFileFactory(endpoint=endpoint, path="/latest/meta-data"))
    enqueue_run(run)
    # Any class but egress would mean XrdCl had been let loose on the address.
    [done] = wait_for_final([run], celery_worker, timeout_s=30)
    assert done.status == Run.Status.FAILED
    [error] = done.errors
    assert error["class"] == "egress"
    assert "refused by egress policy: 169.254.169.254" in error["message"]
    assert "169.254.0.0/16" in error["message"]


def test_a_worker_allowing_no_loopback_refuses_the_lab(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    worker = start_celery_worker("strict", env={"FEDPROBE_EGRESS_ALLOW": ""})
    campaign = CampaignFactory(
        endpoints=[lab_endpoint(lab, "local-http")],
        vantage_points=[VantagePoint.objects.create(name="strict")],
    )
    launched = campaign_launch(campaign=campaign, trigger=Run.Trigger.API)
    [done] = wait_for_final(launched, worker)
    assert done.status == Run.Status.FAILED
    assert [e["class"] for e in done.errors] == ["egress"]
    assert "127.0.0.1" in done.errors[0]["message"]
