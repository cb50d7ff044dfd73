"""Real Celery workers on the `notify` queue: they deliver, and a worker killed while a
message is in flight costs at most that one message sent again, with its idempotency key,
once its lease ends; every other delivery reaches the receiver exactly once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from tests.celery_worker import WorkerProcess, wait_until
from tests.webapp.factories import user
from tests.webapp.notifications.conftest import HttpReceiver, move, regression
from webapp.celery import app
from webapp.notifications.models import Delivery, Subscription
from webapp.notifications.tasks import NOTIFY_PUMP
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db(transaction=True)
LEASE_S = 12
NOTIFY_ENV = {
    "FEDPROBE_NOTIFY_LEASE_S": str(LEASE_S),
    "FEDPROBE_NOTIFY_TIMEOUT_S": "5",
    "EMAIL_TIMEOUT": "5",
}


@pytest.fixture
def notify_worker(
    transactional_db: None, celery_worker_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[[], WorkerProcess]]:
    """notify_worker(): a started worker of the test's own consuming only `notify`."""
    workers: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        name = f"notify-{len(workers)}"
        env = {**celery_worker_env, **NOTIFY_ENV}
        worker = WorkerProcess(name, ["notify"], env, tmp_path / f"{name}.log")
        workers.append(worker)
        return worker.start().wait_ready()

    yield start
    for worker in workers:
        worker.stop()


def pump() -> None:
    app.send_task(NOTIFY_PUMP, queue="notify")


def last_pass(worker: WorkerProcess) -> None:
    """Let the worker finish every pass sent so far, then one more (after which the test's
    counts must still hold: nothing is sent again)."""

    def passes(state: str) -> int:
        return worker.log().count(f"] {state}")  # the log's "Task NAME[id] received" lines

    wait_until(lambda: passes("succeeded") == passes("received"), 60, "the passes", worker)
    done = passes("succeeded")
    pump()
    wait_until(lambda: passes("succeeded") > done, 60, "a last pass", worker)


def subscribe(receiver: HttpReceiver) -> Subscription:
    return Subscription.objects.create(
        owner=user("ops"), channel="webhook", url=receiver.url, url_shown="http://127.0.0.1/…"
    )


def test_a_notify_worker_delivers_each_change(
    notify_worker: Callable[[], WorkerProcess], http_receiver: HttpReceiver
) -> None:
    http_receiver.start()
    subscribe(http_receiver)
    row = regression()
    move(row, Regression.State.OPEN, Regression.State.RESOLVED, at=timezone.now())
    worker = notify_worker()
    pump()
    wait_until(lambda: len(http_receiver.received) == 2, 60, "two messages", worker)
    last_pass(worker)
    assert [r.body["event"] for r in http_receiver.received] == ["confirmed", "resolved"]


@pytest.mark.faults
def test_a_worker_killed_mid_send_repeats_only_the_message_in_flight_with_its_key(
    notify_worker: Callable[[], WorkerProcess], http_receiver: HttpReceiver
) -> None:
    http_receiver.hold = True  # the first request is recorded, then left unanswered
    http_receiver.start()
    subscribe(http_receiver)
    for _ in range(3):
        move(regression(), Regression.State.OPEN, at=timezone.now())
    first = notify_worker()
    pump()
    wait_until(http_receiver.arrived.is_set, 60, "the first message", first)
    first.kill_host()
    in_flight = Delivery.objects.get(status="sending")
    assert Delivery.objects.filter(status="pending").count() == 2

    http_receiver.hold = False
    http_receiver.release.set()
    second = notify_worker()
    pumped = [0.0]

    def all_sent() -> bool:
        if time.monotonic() - pumped[-1] > 2:  # a pass every 2 s, until the lease has ended
            pump()
            pumped.append(time.monotonic())
        return Delivery.objects.filter(status="sent").count() == 3

    wait_until(all_sent, LEASE_S + 90, "every delivery sent", second)
    last_pass(second)

    counts = Counter(http_receiver.keys())
    assert counts[in_flight.idempotency_key] == 2
    assert sorted(counts.values()) == [1, 1, 2]  # three distinct keys: the receiver dedupes
    assert Delivery.objects.get(pk=in_flight.pk).attempts == 2
    again = [
        r.at
        for r in http_receiver.received
        if r.headers["Idempotency-Key"] == in_flight.idempotency_key
    ]
    assert in_flight.lease_until is not None
    assert again[1] >= in_flight.lease_until.timestamp()  # not claimed again before its lease ended
