"""End to end: a real run of the lab, measured by the session's Celery worker while one
archiver hangs, ends on its own time and is then archived once by beat's task (sent to the
session worker's `control` queue here: deployed, it goes to `notify`, which that worker does
not consume)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings

from tests.celery_worker import WorkerProcess, wait_until
from tests.webapp.archivers.conftest import http_archiver, pump
from tests.webapp.factories import CampaignFactory
from tests.webapp.notifications.conftest import HttpReceiver
from webapp.archivers.models import ArchiveDelivery
from webapp.archivers.tasks import ARCHIVE_PUMP
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch
from webapp.celery import app
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint, VantagePoint


@pytest.mark.lab
def test_a_lab_run_ends_unhindered_by_a_hung_archiver_and_is_archived_once(
    lab: Any, celery_worker: WorkerProcess, http_receiver: HttpReceiver
) -> None:
    assert settings.CELERY_BEAT_SCHEDULE["archive-pump"]["task"] == ARCHIVE_PUMP
    assert settings.CELERY_TASK_ROUTES[ARCHIVE_PUMP] == {"queue": "notify"}
    lab_register(lab=lab)
    hung = HttpReceiver(hold=True).start()
    http_receiver.start()
    try:
        http_archiver(hung, timeout_s=1.0)
        http_archiver(http_receiver)
        campaign = CampaignFactory(
            endpoints=[Endpoint.objects.get(name="local-root")],
            vantage_points=[VantagePoint.local()],
            clients=[1],
            read_sizes=[1 << 20],
            fractions=[0.25],
        )
        (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
        started = time.monotonic()
        wait_until(
            lambda: Run.objects.get(pk=run.pk).status in Run.Status.FINAL,
            60,
            "the run ended",
            celery_worker,
        )
        measured_s = time.monotonic() - started
        app.send_task(ARCHIVE_PUMP, queue="control")
        wait_until(
            ArchiveDelivery.objects.filter(status="delivered").exists,
            60,
            "the run archived",
            celery_worker,
        )
        pump()  # another pass: nothing twice
    finally:
        hung.stop()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and measured_s < 30
    (received,) = http_receiver.received
    assert received.body["run"]["id"] == run.pk
    assert received.body["run"]["bytes_read"] == run.bytes_read > 0
    assert len(received.body["run"]["clients"]) == 1
    statuses = dict(ArchiveDelivery.objects.values_list("archiver__url", "status"))
    assert statuses == {http_receiver.url: "delivered", hung.url: "pending"}
