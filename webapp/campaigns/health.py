"""Worker and queue health: which workers listen on each vantage point's queue, when each was
last seen, and how many runs wait there (docs/workers.md#worker-health).

Workers report themselves: a thread in each worker's main process (webapp/celery.py) writes
one WorkerHeartbeat row per queue it consumes every FEDPROBE_WORKER_HEARTBEAT_S seconds, and
marks them stopped at a warm shutdown. A worker whose last heartbeat is older than
FEDPROBE_WORKER_STALE_S (default 120 s) counts as gone: it was killed, its host died, or it
cannot reach the database. Pages read those rows; nothing here broadcasts to the workers (an
`inspect ping` waits a second or more for answers on every view).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from webapp.campaigns.models import Run
from webapp.sites.models import VantagePoint, WorkerHeartbeat

logger = logging.getLogger(__name__)

# A page asking the broker how many messages wait gives up after this: a vanished Redis must
# not hold the page for the broker's usual 5 s connect timeout.
BROKER_TIMEOUT_S = 1.0
# AMQP's reply code for a queue that does not exist.
NOT_FOUND = 404


@dataclass(frozen=True)
class WorkerSeen:
    """One worker on one queue, as its newest heartbeat row says."""

    hostname: str
    pid: int
    version: str
    started_at: datetime
    last_seen: datetime
    stopped_at: datetime | None
    current_run_id: int | None
    live: bool


@dataclass(frozen=True)
class VantagePointHealth:
    """Who listens on a vantage point's queue and what waits there."""

    queue: str
    workers: list[WorkerSeen]  # live ones first, then the newest seen
    queued_runs: int  # its runs in status queued (the database's queue)
    broker_messages: int | None  # messages waiting in the broker; None: not asked, or no answer
    stale_after_s: int
    max_parallel_runs: int = 1  # what its workers' --concurrency needs to be at least

    @property
    def live_workers(self) -> list[WorkerSeen]:
        return [worker for worker in self.workers if worker.live]

    @property
    def listening(self) -> bool:
        return bool(self.live_workers)

    @property
    def last_seen(self) -> datetime | None:
        return max((worker.last_seen for worker in self.workers), default=None)

    @property
    def worker_command(self) -> str:
        name = self.queue.removeprefix("vantage.")
        concurrency = self.max_parallel_runs
        return f"celery -A webapp worker -Q {self.queue} --concurrency {concurrency} -n {name}@%h"


def worker_heartbeat(
    *,
    hostname: str,
    queues: Sequence[str],
    pid: int,
    version: str,
    started_at: datetime,
    current_run_id: int | None,
    now: datetime,
) -> None:
    """Record that worker `hostname` (pid `pid`) consumes `queues`, now."""
    for queue in queues:
        WorkerHeartbeat.objects.update_or_create(
            hostname=hostname,
            queue=queue,
            defaults={
                "pid": pid,
                "version": version[:50],
                "started_at": started_at,
                "last_seen": now,
                "stopped_at": None,
                "current_run_id": current_run_id,
            },
        )


def worker_stopped(*, hostname: str, pid: int, now: datetime) -> int:
    """Record a warm shutdown of worker `hostname` (pid `pid`): it is gone at once."""
    return WorkerHeartbeat.objects.filter(hostname=hostname, pid=pid).update(
        stopped_at=now, current_run_id=None
    )


def worker_is_live(*, heartbeat: WorkerHeartbeat, now: datetime, stale_after_s: int) -> bool:
    return heartbeat.stopped_at is None and heartbeat.last_seen > now - timedelta(
        seconds=stale_after_s
    )


def vantage_points_health(
    *,
    vantage_points: Iterable[VantagePoint],
    now: datetime | None = None,
    broker: bool = False,
) -> dict[int, VantagePointHealth]:
    """Each vantage point's health by its id, in two queries (and, with `broker`, one broker
    connection for the message counts)."""
    vantage_points = list(vantage_points)
    now = now or timezone.now()
    stale_after_s = settings.FEDPROBE_WORKER_STALE_S
    queues = [vantage_point.queue for vantage_point in vantage_points]
    seen: dict[str, list[WorkerSeen]] = {queue: [] for queue in queues}
    for heartbeat in WorkerHeartbeat.objects.filter(queue__in=queues).order_by("-last_seen"):
        seen[heartbeat.queue].append(_worker_seen(heartbeat, now, stale_after_s))
    queued = dict(
        Run.objects.filter(status=Run.Status.QUEUED, vantage_point__in=vantage_points)
        .order_by()
        .values("vantage_point")
        .annotate(count=Count("id"))
        .values_list("vantage_point", "count")
    )
    messages = broker_message_counts(queues=queues) if broker and queues else {}
    return {
        vantage_point.pk: VantagePointHealth(
            queue=vantage_point.queue,
            workers=sorted(seen[vantage_point.queue], key=lambda worker: not worker.live),
            queued_runs=queued.get(vantage_point.pk, 0),
            broker_messages=messages.get(vantage_point.queue),
            stale_after_s=stale_after_s,
            max_parallel_runs=vantage_point.max_parallel_runs,
        )
        for vantage_point in vantage_points
    }


def _worker_seen(heartbeat: WorkerHeartbeat, now: datetime, stale_after_s: int) -> WorkerSeen:
    live = worker_is_live(heartbeat=heartbeat, now=now, stale_after_s=stale_after_s)
    return WorkerSeen(
        hostname=heartbeat.hostname,
        pid=heartbeat.pid,
        version=heartbeat.version,
        started_at=heartbeat.started_at,
        last_seen=heartbeat.last_seen,
        stopped_at=heartbeat.stopped_at,
        current_run_id=heartbeat.current_run_id if live else None,
        live=live,
    )


def broker_message_counts(*, queues: Sequence[str]) -> dict[str, int]:
    """How many messages wait in the broker on each queue (not those a worker has taken):
    Redis's list lengths (all of a queue's priority lists), RabbitMQ's ready messages, or the
    embedded broker's message files. Empty when the broker does not answer within
    BROKER_TIMEOUT_S."""
    from webapp.celery import app  # the Celery app loads with Django's settings

    options = {"socket_connect_timeout": BROKER_TIMEOUT_S, "socket_timeout": BROKER_TIMEOUT_S}
    try:
        with app.connection_for_read(
            transport_options=options, connect_timeout=BROKER_TIMEOUT_S
        ) as connection:
            connection.connect()  # one try: the app's own retries are for workers
            if connection.transport.driver_type == "amqp":
                return _amqp_message_counts(connection, queues)
            channel: Any = connection.channel()  # a virtual transport's Channel, untyped
            try:
                # kombu's virtual transports (Redis, filesystem) count a queue with _size.
                return {queue: int(channel._size(queue)) for queue in queues}
            finally:
                channel.close()
    except Exception as exc:  # any broker failure only costs the figure
        logger.warning("broker message counts unavailable: %s", exc)
        return {}


def _amqp_message_counts(connection: Any, queues: Sequence[str]) -> dict[str, int]:
    """RabbitMQ's ready messages per queue, by a passive declare (which creates nothing); a
    queue nobody declared yet holds none, and its refusal closes only its own channel."""
    counts = {}
    for queue in queues:
        channel = connection.channel()
        try:
            counts[queue] = int(channel.queue_declare(queue=queue, passive=True).message_count)
        except Exception as exc:  # NOT_FOUND (404): no message was ever sent there
            if getattr(exc, "code", None) != NOT_FOUND:
                raise
            counts[queue] = 0
        finally:
            with contextlib.suppress(Exception):
                channel.close()
    return counts
