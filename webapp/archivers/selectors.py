"""What an operator (and /metrics) wants to know of the archivers: how far behind each is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from webapp.archivers.models import ArchiveDelivery, Archiver

WAITING = (ArchiveDelivery.Status.PENDING, ArchiveDelivery.Status.SENDING)


@dataclass(frozen=True)
class ArchiverBacklog:
    """One archiver's backlog: runs waiting for it, the oldest's age, those given up."""

    name: str
    kind: str
    enabled: bool
    pending: int  # made, not yet delivered (pending or being sent)
    oldest_pending_s: float | None  # how long the oldest of them has waited; None: none
    failed: int  # given up (shown in the admin, with their last error)
    last_delivered_at: datetime | None


def backlog(*, now: datetime | None = None) -> list[ArchiverBacklog]:
    """Every archiver's backlog, by name, in one query."""
    now = now or timezone.now()
    waiting = Q(deliveries__status__in=WAITING)
    rows = Archiver.objects.annotate(
        pending=Count("deliveries", filter=waiting),
        oldest=Min("deliveries__created_at", filter=waiting),
        failed=Count("deliveries", filter=Q(deliveries__status=ArchiveDelivery.Status.FAILED)),
        last_delivered_at=Max("deliveries__delivered_at"),
    ).order_by("name")
    return [
        ArchiverBacklog(
            name=row.name,
            kind=row.kind,
            enabled=row.enabled,
            pending=row.pending,
            oldest_pending_s=(now - row.oldest).total_seconds() if row.oldest else None,
            failed=row.failed,
            last_delivered_at=row.last_delivered_at,
        )
        for row in rows
    ]
