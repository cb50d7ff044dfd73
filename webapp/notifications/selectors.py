"""Reads of the notifications' pages: a user's subscriptions (their own and their teams'),
the deliveries admins watch."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from webapp.accounts.models import Team
from webapp.accounts.roles import is_admin
from webapp.accounts.selectors import teams_of
from webapp.notifications.models import Delivery, Subscription
from webapp.sites.models import Endpoint, Site, VantagePoint

TROUBLED = (Delivery.Status.PENDING, Delivery.Status.SENDING, Delivery.Status.FAILED)


def subscriptions_of(*, user: User) -> QuerySet[Subscription]:
    """The user's own subscriptions and those of the teams they are in."""
    mine = Q(owner=user.pk) | Q(team__memberships__user=user.pk)
    return Subscription.objects.filter(mine).select_related("team").distinct().order_by("id")


def subscriptions_managed_by(*, user: User) -> QuerySet[Subscription]:
    """Those the user may change or delete: theirs and their teams' (an admin: all)."""
    return Subscription.objects.all() if is_admin(user) else subscriptions_of(user=user)


def teams_for_subscribing(*, user: User) -> QuerySet[Team]:
    """The teams the user may subscribe: theirs (an admin: every team)."""
    return Team.objects.all() if is_admin(user) else teams_of(user=user)


def deliveries_troubled(*, limit: int = 200) -> QuerySet[Delivery]:
    """Deliveries not (yet) sent, failed ones first, with who they were for and the error."""
    return (
        Delivery.objects.filter(status__in=TROUBLED)
        .select_related("subscription__owner", "subscription__team", "recipient", "event")
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
