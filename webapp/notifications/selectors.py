"""Reads of the notifications' pages: a user's subscriptions, the deliveries admins watch."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from webapp.notifications.models import Delivery, Subscription
from webapp.sites.models import Endpoint, Site, VantagePoint

TROUBLED = (Delivery.Status.PENDING, Delivery.Status.SENDING, Delivery.Status.FAILED)


def subscriptions_of(*, user: User) -> QuerySet[Subscription]:
    return Subscription.objects.filter(owner=user).order_by("id")


def deliveries_troubled(*, limit: int = 200) -> QuerySet[Delivery]:
    """Deliveries not (yet) sent, failed ones first, with who they were for and the error."""
    return (
        Delivery.objects.filter(status__in=TROUBLED)
        .select_related("subscription__owner", "event")
        .order_by("status", "next_attempt_at")[:limit]
    )


def target_choices() -> list[tuple[str, object]]:
    """What a subscription can be about, grouped, as the form's choices ("site:3", ...)."""
    return [
        ("all", "Everything"),
        ("Sites", [(f"site:{s.pk}", s.name) for s in Site.objects.order_by("name")]),
        (
            "Endpoints",
            [
                (f"endpoint:{e.pk}", f"{e.site.name}: {e.name}")
                for e in Endpoint.objects.select_related("site").order_by("site__name", "name")
            ],
        ),
        (
            "Vantage points",
            [(f"vantage_point:{v.pk}", v.name) for v in VantagePoint.objects.order_by("name")],
        ),
    ]
