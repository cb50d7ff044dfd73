"""Runs pushed to a real HTTP receiver on loopback: once per (run, archiver), retried on the
archiver's schedule with one idempotency key, never longer than its timeout per attempt,
only where the egress policy allows, with the run JSON the API serves and no secret."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from tests.webapp.archivers.conftest import (
    ENDPOINT_TOKEN,
    TOKEN,
    finished_run,
    http_archiver,
    pump,
)
from tests.webapp.factories import SiteFactory, api_for, user
from tests.webapp.notifications.conftest import HttpReceiver
from webapp.archivers.models import ArchiveDelivery
from webapp.archivers.selectors import backlog
from webapp.archivers.services import archiver_save

pytestmark = pytest.mark.django_db
Status = ArchiveDelivery.Status


@pytest.mark.sqlite
def test_a_receiver_answering_503_gets_the_run_once_after_a_retry_with_one_key(
    http_receiver: HttpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    http_receiver.status = 503
    http_receiver.start()
    http_archiver(http_receiver)
    run = finished_run()
    with caplog.at_level(logging.DEBUG):
        first = pump()
    assert len(first.retrying) == 1 and first.delivered == []
    (delivery,) = ArchiveDelivery.objects.all()
    assert delivery.status == Status.PENDING and delivery.last_error == "the receiver answered 503"

    pump()  # not due yet (the policy waits 5 s): nothing sent
    assert len(http_receiver.received) == 1
    http_receiver.status = 200
    later = timezone.now() + timedelta(seconds=6)
    assert len(pump(later).delivered) == 1
    pump(later + timedelta(minutes=5))

    assert len(http_receiver.received) == 2
    assert len(set(http_receiver.keys())) == 1
    assert http_receiver.keys()[0] == f"fedprobe-run-{run.pk}-archiver-{delivery.archiver_id}"
    received = http_receiver.received[-1]
    assert received.headers["Authorization"] == TOKEN
    assert received.body["kind"] == "fedprobe.run" and received.body["version"] == 1
    served = api_for(user("viewer", "viewer")).get(f"/api/v1/runs/{run.pk}/").json()
    assert received.body["run"] == {name: served[name] for name in received.body["run"]}
    assert received.body["run"]["throughput_mbps"] == 812.5
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (Status.DELIVERED, 2)
    assert ENDPOINT_TOKEN not in str(received.body) and TOKEN not in caplog.text


@pytest.mark.sqlite
def test_the_retry_policy_runs_out_and_the_delivery_is_failed(
    http_receiver: HttpReceiver, django_assert_num_queries: Any
) -> None:
    http_receiver.status = 500
    http_receiver.start()
    http_archiver(http_receiver, retry_policy=[{"attempts": 1, "wait_s": 5}])
    finished_run()
    pump()
    pump(timezone.now() + timedelta(seconds=6))
    (delivery,) = ArchiveDelivery.objects.all()
    assert (delivery.status, delivery.attempts) == (Status.FAILED, 2)
    http_archiver(http_receiver, name="idle")
    with django_assert_num_queries(1):
        rows = backlog()
    assert [(row.name, row.pending, row.failed) for row in rows] == [
        ("http-0", 0, 1),
        ("idle", 0, 0),
    ]


def test_a_hung_receiver_costs_a_pass_one_timeout_and_other_archivers_go_on(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.hold = True
    http_receiver.start()
    healthy = HttpReceiver().start()
    try:
        http_archiver(http_receiver, timeout_s=1.0)
        http_archiver(healthy)
        runs = [finished_run(), finished_run()]
        started = time.monotonic()
        outcome = pump()
        elapsed = time.monotonic() - started
    finally:
        healthy.stop()

    assert elapsed < 4  # one attempt timed out (1 s); the hung one's second run waits
    assert len(outcome.retrying) == 1 and len(outcome.delivered) == 2
    assert sorted(r.body["run"]["id"] for r in healthy.received) == sorted(r.pk for r in runs)
    hung = ArchiveDelivery.objects.filter(archiver__url=http_receiver.url)
    assert sorted(hung.values_list("status", "attempts")) == [("pending", 0), ("pending", 1)]
    assert hung.get(attempts=1).last_error == "the receiver did not answer in time"
    (waiting,) = [row for row in backlog() if row.pending]
    assert waiting.pending == 2 and waiting.oldest_pending_s is not None


def test_an_address_outside_the_egress_policy_is_refused_on_save_and_at_send(
    http_receiver: HttpReceiver, settings: Any
) -> None:
    for url in ("http://169.254.169.254/latest/", "http://[::ffff:169.254.169.254]/"):
        with pytest.raises(ValidationError) as refused:
            http_archiver(http_receiver, url=url)
        assert "egress" in refused.value.message_dict["url"][0]
    with pytest.raises(ValidationError) as refused:
        archiver_save(
            values={
                "name": "meta",
                "kind": "amqp",
                "url": "amqp://169.254.169.254/",
                "exchange": "x",
            },
            now=timezone.now(),
        )
    assert "egress" in refused.value.message_dict["url"][0]

    http_receiver.start()
    http_archiver(http_receiver, url=f"http://localhost:{http_receiver.port}/hook")
    settings.FEDPROBE_EGRESS_ALLOW = []  # loopback no longer allowed since it was saved
    finished_run()
    pump()
    (delivery,) = ArchiveDelivery.objects.all()
    assert delivery.status == Status.FAILED and "refused by egress policy" in delivery.last_error
    assert http_receiver.received == []


def test_a_secret_in_the_url_is_refused_it_goes_in_a_header(http_receiver: HttpReceiver) -> None:
    with pytest.raises(ValidationError) as refused:
        http_archiver(http_receiver, url=f"{http_receiver.url}?access_token=abc")
    assert "put it in headers" in refused.value.message_dict["url"][0]


def test_only_runs_of_its_campaign_or_site_ended_after_it_was_made_are_pushed(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    before = finished_run(finished_at=timezone.now() - timedelta(hours=1))
    mine = finished_run()
    other_site = finished_run()
    finished_run(status="cancelled")
    http_archiver(http_receiver, site=mine.endpoint.site)
    http_archiver(http_receiver, campaign=other_site.campaign)
    http_archiver(http_receiver, site=SiteFactory())
    pump()
    pump()
    pushed = Counter(r.body["run"]["id"] for r in http_receiver.received)
    assert pushed == {mine.pk: 1, other_site.pk: 1}
    assert before.pk not in pushed


@pytest.mark.django_db(transaction=True)
def test_two_pumps_at_once_deliver_each_run_once(http_receiver: HttpReceiver) -> None:
    http_receiver.start()
    http_archiver(http_receiver)
    runs = [finished_run() for _ in range(6)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def one_pump() -> None:
        from django.db import connection

        try:
            barrier.wait()
            pump()
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one_pump) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    ids = Counter(r.body["run"]["id"] for r in http_receiver.received)
    assert ids == {run.pk: 1 for run in runs}
    assert set(ArchiveDelivery.objects.values_list("status", flat=True)) == {Status.DELIVERED}


def test_a_paused_archiver_is_sent_nothing_its_runs_wait_and_go_when_resumed(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    archiver = http_archiver(http_receiver, enabled=False)
    run = finished_run()
    pump()
    assert http_receiver.received == []
    assert [(row.pending, row.enabled) for row in backlog()] == [(1, False)]

    archiver_save(values={"enabled": True}, now=timezone.now(), archiver=archiver)
    pump()
    assert [r.body["run"]["id"] for r in http_receiver.received] == [run.pk]


@pytest.mark.django_db(transaction=True)
def test_a_failure_after_another_worker_took_the_delivery_over_leaves_its_claim_alone(
    http_receiver: HttpReceiver,
) -> None:
    """A worker whose lease ended while it sent (another took the delivery over) records no
    outcome over the other's: the delivery stays the other's, sending, with its lease."""
    http_receiver.hold, http_receiver.status = True, 503
    http_receiver.start()
    http_archiver(http_receiver)
    finished_run()
    errors: list[BaseException] = []

    def slow_pump() -> None:
        from django.db import connection

        try:
            pump()
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_pump)
    thread.start()
    assert http_receiver.arrived.wait(10)
    theirs = timezone.now() + timedelta(minutes=30)
    ArchiveDelivery.objects.update(lease_until=theirs)  # the other worker's claim
    http_receiver.release.set()
    thread.join(30)
    assert errors == []
    delivery = ArchiveDelivery.objects.get()
    assert (delivery.status, delivery.lease_until, delivery.last_error) == (
        Status.SENDING,
        theirs,
        "",
    )
