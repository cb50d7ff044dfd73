"""Runs whose broker message was lost: sent again while no worker of their vantage point
takes anything, failed after the last send, measured once however often they were sent."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import CampaignFactory, RunFactory, VantagePointFactory
from tests.workers.test_celery import lab_endpoint, queued_messages, wait_for_final, wait_until
from webapp.campaigns.dispatch import RESEND_RUNS
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import (
    ResendOutcome,
    campaign_launch,
    run_cancel,
    run_claim,
    runs_resend_stale,
)
from webapp.celery import app
from webapp.sites.models import VantagePoint

NOTHING = ResendOutcome(resent=[], failed=[])


def queued_run(vantage_point: str, **fields: Any) -> Run:
    return RunFactory(vantage_point=VantagePointFactory(name=vantage_point), **fields)


def after(run: Run, seconds: float) -> datetime:
    return run.created_at + timedelta(seconds=seconds)


def sent_run_ids(broker_url: str, queue: str) -> list[int]:
    bodies = (base64.b64decode(m["body"]) for m in queued_messages(broker_url, queue))
    return [json.loads(body)[0][0] for body in bodies]


@pytest.mark.django_db
def test_a_run_still_queued_after_the_delay_on_an_idle_vantage_point_is_sent_again(
    celery_broker_url: str, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    assert settings.FEDPROBE_RESEND_AFTER_S == 300
    run = queued_run("resend-idle")
    assert runs_resend_stale(now=after(run, 299)) == NOTHING
    with django_capture_on_commit_callbacks(execute=True):
        outcome = runs_resend_stale(now=after(run, 301))
    assert outcome == ResendOutcome(resent=[run.pk], failed=[])
    assert sent_run_ids(celery_broker_url, "vantage.resend-idle") == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.resent_count, run.resent_at) == ("queued", 1, after(run, 301))
    # The delay counts again from the last send.
    assert runs_resend_stale(now=after(run, 302)) == NOTHING
    assert runs_resend_stale(now=after(run, 600)) == NOTHING


@pytest.mark.django_db
def test_after_its_last_send_a_run_no_worker_took_fails_naming_the_queue(
    django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    assert settings.FEDPROBE_RESEND_MAX_SENDS == 3
    run = queued_run("resend-nobody")
    with django_capture_on_commit_callbacks(execute=True):
        assert runs_resend_stale(now=after(run, 301)).resent == [run.pk]  # second send
        assert runs_resend_stale(now=after(run, 602)).resent == [run.pk]  # third send
    assert runs_resend_stale(now=after(run, 903)) == ResendOutcome(resent=[], failed=[run.pk])
    run.refresh_from_db()
    assert (run.status, run.finished_at, run.resent_count) == ("failed", after(run, 903), 2)
    assert run.errors == [
        {
            "class": "harness",  # the tester's fault, not the endpoint's
            "message": "no worker took the run: is a worker consuming queue vantage.resend-nobody?",
            "client": None,
        }
    ]
    assert run_claim(run_id=run.pk, worker="late@host") is None  # a late message does nothing
    assert runs_resend_stale(now=after(run, 2000)) == NOTHING


@pytest.mark.django_db
def test_runs_waiting_behind_a_busy_worker_are_left_alone(
    django_capture_on_commit_callbacks: Any,
) -> None:
    measuring = queued_run("resend-busy")
    run_claim(run_id=measuring.pk, worker="busy@host")  # a 6-hour run, say
    waiting = queued_run("resend-busy")
    just_took_one = queued_run("resend-recent")
    run_claim(run_id=just_took_one.pk, worker="recent@host")
    Run.objects.filter(pk=just_took_one.pk).update(status=Run.Status.SUCCEEDED)
    behind = queued_run("resend-recent")
    lost = queued_run("resend-lost")

    now = after(lost, 3600)
    Run.objects.filter(pk=just_took_one.pk).update(started_at=now - timedelta(seconds=299))
    with django_capture_on_commit_callbacks(execute=True):
        outcome = runs_resend_stale(now=now)
    assert outcome == ResendOutcome(resent=[lost.pk], failed=[])
    assert Run.objects.get(pk=waiting.pk).resent_count == 0
    assert Run.objects.get(pk=behind.pk).resent_count == 0


@pytest.mark.django_db
def test_cancelled_and_ended_runs_are_never_sent_again() -> None:
    cancelled = run_cancel(run=queued_run("resend-ended"))
    asked_to_cancel = queued_run("resend-ended", cancel_requested=True)
    succeeded = queued_run("resend-ended", status=Run.Status.SUCCEEDED)
    assert {cancelled.status, asked_to_cancel.status} == {"cancelled", "queued"}
    assert runs_resend_stale(now=after(succeeded, 10_000)) == NOTHING


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_send_a_run_once(celery_broker_url: str) -> None:
    run = queued_run("resend-race")
    start = threading.Barrier(2)
    outcomes: list[ResendOutcome] = []

    def one_pass() -> None:
        try:
            start.wait()
            outcomes.append(runs_resend_stale(now=after(run, 301)))
        finally:
            connection.close()

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(pk for outcome in outcomes for pk in outcome.resent) == [run.pk]
    assert sent_run_ids(celery_broker_url, "vantage.resend-race") == [run.pk]
    assert Run.objects.get(pk=run.pk).resent_count == 1


def test_a_run_sent_twice_is_measured_once(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess], celery_broker_url: str
) -> None:
    endpoint = lab_endpoint(lab, "local-root")
    campaign = CampaignFactory(
        endpoints=[endpoint], vantage_points=[VantagePoint.objects.create(name="resent")]
    )
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.API)
    # No worker yet: the pass takes the launch's message for lost and sends another.
    assert runs_resend_stale(now=after(run, 301)).resent == [run.pk]
    assert sent_run_ids(celery_broker_url, "vantage.resent") == [run.pk, run.pk]

    worker = start_celery_worker("resent")
    (run,) = wait_for_final([run], worker)
    wait_until(lambda: worker.log().count(" succeeded in ") == 2, 30, "both messages", worker)
    assert run.status == Run.Status.SUCCEEDED, run.errors
    attempts = list(run.attempts.values_list("client", "status"))
    assert attempts == [(client, ClientAttempt.Status.OK) for client in range(run.clients)]
    assert sent_run_ids(celery_broker_url, "vantage.resent") == []


def test_beat_s_task_sends_lost_runs_again_on_the_control_worker(
    celery_worker: WorkerProcess, celery_broker_url: str
) -> None:
    run = queued_run("resend-task")
    Run.objects.filter(pk=run.pk).update(created_at=after(run, -3600))
    app.send_task(RESEND_RUNS)
    wait_until(lambda: sent_run_ids(celery_broker_url, "vantage.resend-task"), 30, "sent again")
    assert Run.objects.get(pk=run.pk).resent_count == 1
