"""From finished runs to archivers: deliveries made, claimed, sent, retried on a schedule.

Each step is safe to run twice, or in two workers at once, as the notifications' outbox is:
- making: one delivery per (run, archiver), unique; each archiver keeps a watermark (the
  finished_at it has scanned to) and each pass looks again SCAN_OVERLAP behind it, for runs
  whose transaction committed late; rows already made are skipped by the constraint;
- sending: a delivery is claimed by a conditional update (pending and due, or sending with an
  ended lease -> sending with a new lease) before it is sent, and marked delivered after. A
  worker that dies between sending and marking leaves it `sending` until its lease ends; then
  it is sent again with the same idempotency key (at-least-once towards the receiver: the key
  lets it drop the repeat).
Nothing here runs in a measurement's path: beat runs the pump on the `notify` queue, and an
archiver that fails is skipped for the rest of the pass, so a dead one costs a pass at most one
attempt's timeout.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q
from rest_framework.utils.encoders import JSONEncoder

from webapp.archivers.channels import archive_send
from webapp.archivers.models import ArchiveDelivery, Archiver
from webapp.campaigns.models import Run
from webapp.campaigns.selectors import run_json
from webapp.notifications.channels import DeliveryError
from webapp.notifications.outbox import PASS_BUDGET

logger = logging.getLogger(__name__)
Status = ArchiveDelivery.Status
MAKE_BATCH = 500  # per archiver and pass
SEND_BATCH = 100  # per query; a pass sends batches until PASS_BUDGET
SCAN_OVERLAP = timedelta(hours=1)
MESSAGE_VERSION = 1


@dataclass
class PumpOutcome:
    """What one pass did: deliveries made, and the ids delivered, retried later, failed."""

    made: int = 0
    delivered: list[int] = field(default_factory=list)
    retrying: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def archivers_pump(*, clock: Callable[[], datetime]) -> PumpOutcome:
    """One pass: make the deliveries of runs finished since each archiver's watermark, then
    send what is due, a batch after another, until nothing is or PASS_BUDGET is spent; an
    archiver whose attempt failed waits for the next pass. `clock` is read for each claim, so
    leases start when each send does."""
    started = clock()
    outcome = PumpOutcome(made=deliveries_make(now=started))
    failing: set[int] = set()
    while clock() - started <= PASS_BUDGET:
        due = deliveries_due(now=clock(), skip=failing)
        if not due:
            break
        for delivery_id, archiver_id in due:
            if clock() - started > PASS_BUDGET:
                break  # the next pass goes on
            if archiver_id not in failing:
                _send_one(delivery_id, archiver_id, outcome, failing, now=clock())
    return outcome


def _send_one(
    delivery_id: int, archiver_id: int, outcome: PumpOutcome, failing: set[int], *, now: datetime
) -> None:
    status = delivery_send(delivery_id=delivery_id, now=now)
    if status == Status.DELIVERED:
        outcome.delivered.append(delivery_id)
    elif status == Status.PENDING:
        outcome.retrying.append(delivery_id)
        failing.add(archiver_id)
    elif status == Status.FAILED:
        outcome.failed.append(delivery_id)


def deliveries_make(*, now: datetime) -> int:
    """Make the new runs' deliveries of every archiver, paused ones too (their backlog shows
    what waits for them; nothing is sent to them)."""
    return sum(_make(archiver, now=now) for archiver in Archiver.objects.all())


def _make(archiver: Archiver, *, now: datetime) -> int:
    made = ArchiveDelivery.objects.filter(archiver=archiver, run=OuterRef("pk"))
    runs = Run.objects.filter(archiver.runs(), ~Exists(made))
    if archiver.scanned_to is not None:
        runs = runs.filter(finished_at__gte=archiver.scanned_to - SCAN_OVERLAP)
    found = list(runs.order_by("finished_at", "id").values_list("pk", "finished_at")[:MAKE_BATCH])
    rows = [
        ArchiveDelivery(archiver=archiver, run_id=run_id, created_at=now, next_attempt_at=now)
        for run_id, _ in found
    ]
    ArchiveDelivery.objects.bulk_create(rows, ignore_conflicts=True)
    # A full batch: the rest is after its last run; otherwise everything up to now is made.
    scanned_to = found[-1][1] if len(found) == MAKE_BATCH else now
    Archiver.objects.filter(pk=archiver.pk).update(scanned_to=scanned_to)
    return len(rows)


def deliveries_due(*, now: datetime, skip: Iterable[int] = ()) -> list[tuple[int, int]]:
    """(delivery, archiver) ids to send now, oldest first, of enabled archivers not in `skip`:
    pending and due, or claimed by a worker whose lease ended (it died, or hangs)."""
    rows = ArchiveDelivery.objects.filter(_due(now), archiver__enabled=True)
    rows = rows.exclude(archiver_id__in=list(skip))
    return list(
        rows.order_by("next_attempt_at", "id").values_list("pk", "archiver_id")[:SEND_BATCH]
    )


def _due(now: datetime) -> Q:
    return Q(status=Status.PENDING, next_attempt_at__lte=now) | Q(
        status=Status.SENDING, lease_until__lt=now
    )


def delivery_send(*, delivery_id: int, now: datetime) -> str | None:
    """Claim the delivery, send it, and record how that went; None when it was not ours to
    send (already delivered, not due, or claimed by another worker)."""
    lease_until = now + timedelta(seconds=settings.FEDPROBE_ARCHIVE_LEASE_S)
    claimed = ArchiveDelivery.objects.filter(_due(now), pk=delivery_id).update(
        status=Status.SENDING, lease_until=lease_until, attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    delivery = ArchiveDelivery.objects.select_related("archiver").get(pk=delivery_id)
    try:
        archive_send(
            archiver=delivery.archiver,
            body=run_message(run_id=delivery.run_id, key=delivery.idempotency_key),
            key=delivery.idempotency_key,
        )
    except DeliveryError as exc:
        return _failed(
            delivery, str(exc), permanent=exc.permanent, now=now, lease_until=lease_until
        )
    except Exception as exc:  # a bug of ours must not leave it claimed until the lease ends
        logger.exception("archive delivery %s: unexpected failure", delivery_id)
        error = f"internal error: {type(exc).__name__}"
        return _failed(delivery, error, permanent=False, now=now, lease_until=lease_until)
    ArchiveDelivery.objects.filter(
        pk=delivery_id, status=Status.SENDING, lease_until=lease_until
    ).update(status=Status.DELIVERED, delivered_at=now, lease_until=None, last_error="")
    return Status.DELIVERED


def run_message(*, run_id: int, key: str) -> dict[str, Any]:
    """What an archiver receives: the run JSON the API serves (GET /api/v1/runs/{id}/,
    without its charts), in an envelope saying what it is."""
    run = (
        Run.objects.select_related("endpoint", "vantage_point", "test_file")
        .prefetch_related("attempts")
        .get(pk=run_id)
    )
    return {
        "kind": "fedprobe.run",
        "version": MESSAGE_VERSION,
        "delivery_id": key,
        "link": f"{settings.FEDPROBE_BASE_URL}/runs/{run.pk}/",
        # Through DRF's encoder, as the API renders it: the same times, decimals and UUIDs.
        "run": json.loads(json.dumps(run_json(run), cls=JSONEncoder)),
    }


def _failed(
    delivery: ArchiveDelivery, error: str, *, permanent: bool, now: datetime, lease_until: datetime
) -> str:
    """Record a failed attempt, if the delivery is still ours (our lease: a worker that took it
    over after our lease ended owns it now, and its outcome is the one that counts)."""
    archiver = delivery.archiver
    wait = None if permanent else archiver.retry_wait(delivery.attempts)
    too_old = now - delivery.created_at >= timedelta(seconds=archiver.ttl_s)
    give_up = wait is None or too_old
    status = Status.FAILED if give_up else Status.PENDING
    ArchiveDelivery.objects.filter(
        pk=delivery.pk, status=Status.SENDING, lease_until=lease_until
    ).update(
        status=status,
        lease_until=None,
        last_error=error[:2000],
        next_attempt_at=now + (wait or timedelta()),
    )
    logger.warning(
        "archive delivery %s (run %s) to %s: %s (%s)",
        delivery.pk,
        delivery.run_id,
        archiver.name,
        error,
        "given up" if give_up else f"trying again in {wait}",
    )
    return status
