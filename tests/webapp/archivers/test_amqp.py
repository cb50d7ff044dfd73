"""Runs published to the machine's real RabbitMQ (a virtual host of the test's own, removed
after): exactly one message per run, the run JSON with its idempotency key, no secret."""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.utils import timezone
from kombu import Connection, Exchange, Queue

from tests.rabbitmq import vhost
from tests.webapp.archivers.conftest import ENDPOINT_TOKEN, finished_run, pump
from webapp.archivers.models import ArchiveDelivery
from webapp.archivers.services import archiver_save

__all__ = ["vhost"]
pytestmark = pytest.mark.django_db
PASSWORD = "guest"  # the machine's broker's; the body must not carry it, nor the user


def test_each_run_is_published_once_with_its_json_and_no_secret(vhost: str) -> None:
    broker = f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}"
    exchange = Exchange("fedprobe-runs", type="topic", durable=False)
    queue = Queue("archive-test", exchange, routing_key="runs.#", durable=False)
    with Connection(broker) as connection:
        queue(connection.default_channel).declare()
        archiver = archiver_save(
            values={
                "name": "rabbit",
                "kind": "amqp",
                "url": f"amqp://127.0.0.1:5672/{quote(vhost, safe='')}",
                "exchange": "fedprobe-runs",
                "routing_key": "runs.lab",
                "username": "guest",
                "password": PASSWORD,
                "timeout_s": 5.0,
            },
            now=timezone.now() - timedelta(minutes=1),
        )
        runs = [finished_run(), finished_run()]
        pump()
        pump()
        messages = _drain(connection, queue)

    assert sorted(json.loads(m.body)["run"]["id"] for m in messages) == sorted(r.pk for r in runs)
    for message in messages:
        body = json.loads(message.body)
        key = f"fedprobe-run-{body['run']['id']}-archiver-{archiver.pk}"
        assert message.properties["message_id"] == key == body["delivery_id"]
        assert message.headers["idempotency-key"] == key
        assert message.content_type == "application/json"
        assert message.delivery_info["routing_key"] == "runs.lab"
        assert ENDPOINT_TOKEN not in message.body
        assert '"guest"' not in message.body
    statuses = ArchiveDelivery.objects.values_list("status", flat=True)
    assert sorted(statuses) == ["delivered", "delivered"]


def test_an_exchange_that_does_not_exist_is_retried_with_the_brokers_reason(vhost: str) -> None:
    archiver_save(
        values={
            "name": "nowhere",
            "kind": "amqp",
            "url": f"amqp://127.0.0.1:5672/{quote(vhost, safe='')}",
            "exchange": "no-such-exchange",
            "routing_key": "runs",
            "username": "guest",
            "password": PASSWORD,
            "timeout_s": 5.0,
        },
        now=timezone.now() - timedelta(minutes=1),
    )
    finished_run()
    outcome = pump()
    (delivery,) = ArchiveDelivery.objects.all()
    assert outcome.retrying == [delivery.pk] and delivery.status == "pending"
    assert "no-such-exchange" in delivery.last_error and PASSWORD not in delivery.last_error


def _drain(connection: Connection, queue: Queue) -> list[Any]:
    bound = queue(connection.default_channel)
    messages = []
    while (message := bound.get(no_ack=True)) is not None:
        messages.append(message)
    return messages


def test_a_broker_that_never_answers_is_cut_off_at_the_archivers_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        archiver_save(
            values={
                "name": "silent",
                "kind": "amqp",
                "url": f"amqp://127.0.0.1:{silent.getsockname()[1]}/",
                "exchange": "fedprobe",
                "routing_key": "runs",
                "timeout_s": 1.0,
            },
            now=timezone.now() - timedelta(minutes=1),
        )
        finished_run()
        started = time.monotonic()
        outcome = pump()
        elapsed = time.monotonic() - started

    (delivery,) = ArchiveDelivery.objects.all()
    assert outcome.retrying == [delivery.pk] and elapsed < 3
    assert delivery.last_error == "the broker did not answer in time"
