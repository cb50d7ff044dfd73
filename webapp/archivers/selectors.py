"""What an operator (and /metrics) wants to know of the archivers: how far behind each is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, FilteredRelation, Min, OuterRef, Q, QuerySet, Subquery
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
    rows: QuerySet[Any] = with_backlog(Archiver.objects.all()).order_by("name")  # annotated
    return [
        ArchiverBacklog(
            name=row.name,
            kind=row.kind,
            enabled=row.enabled,
            pending=row.pending,
            oldest_pending_s=(now - row.oldest_pending_at).total_seconds()
            if row.oldest_pending_at
            else None,
            failed=row.failed,
            last_delivered_at=row.last_delivered_at,
        )
        for row in rows
    ]


def with_backlog(rows: QuerySet[Archiver]) -> QuerySet[Archiver]:
    """`rows` annotated with pending, oldest_pending_at, failed and last_delivered_at, read
    from each archiver's undelivered rows and its last delivery only (indexes on both): cheap
    however long the history of delivered runs."""
    status = ArchiveDelivery.Status
    undelivered = FilteredRelation(
        "deliveries", condition=Q(deliveries__status__in=(*WAITING, status.FAILED))
    )
    waiting = Q(undelivered__status__in=WAITING)
    last = ArchiveDelivery.objects.filter(archiver=OuterRef("pk"), delivered_at__isnull=False)
    return rows.annotate(undelivered=undelivered).annotate(
        pending=Count("undelivered", filter=waiting),
        oldest_pending_at=Min("undelivered__created_at", filter=waiting),
        failed=Count("undelivered", filter=Q(undelivered__status=status.FAILED)),
        last_delivered_at=Subquery(last.order_by("-delivered_at").values("delivered_at")[:1]),
    )
