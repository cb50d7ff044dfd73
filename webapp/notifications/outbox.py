"""From the watch's events to messages received: the fan-out, the daily digests, sending.

Each step is safe to run twice, or in two workers at once:
- fan-out: an event's deliveries and its `EventFanOut` mark are written in one transaction,
  events locked with SKIP LOCKED, deliveries unique per (event, subscription) and, for a
  team's email, per (event, subscription, member); one email address is told an event once,
  however many of its subscriptions (its own, its teams') match;
- digests: unique per (subscription, day) and, for a team's email, per member too;
- sending: a delivery is claimed by a conditional update (pending, or sending with an ended
  lease -> sending with a new lease) before it is sent, and marked sent after. A worker that
  dies between sending and marking leaves it `sending` until its lease ends; then it is sent
  again with the same idempotency key (at-least-once towards the receiver: over HTTP or SMTP
  nobody can do better; the key lets the receiver drop the repeat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet

from webapp.accounts.models import TeamMembership
from webapp.accounts.roles import ROLES
from webapp.notifications.channels import DeliveryError, Message, email_send, webhook_post
from webapp.notifications.messages import Digest, digest_message, event_kind, event_message
from webapp.notifications.models import Delivery, EventFanOut, Subscription
from webapp.watch.models import Regression, RegressionEvent

logger = logging.getLogger(__name__)
Status = Delivery.Status
State = Regression.State
SEVERITY_ORDER = [str(s) for s in Regression.Severity]  # critical first
FAN_OUT_BATCH = 500
SEND_BATCH = 50
# A pass stops claiming after this long, so that a worker shared with measurements (bin/run's,
# docker-compose's) makes a queued run wait at most about this plus one send's timeout.
PASS_BUDGET = timedelta(seconds=30)


@dataclass
class PumpOutcome:
    """What one pass did: deliveries made, and the ids sent, retried later, failed."""

    made: int = 0
    digests: int = 0
    sent: list[int] = field(default_factory=list)
    retrying: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)


def notifications_pump(*, clock: Callable[[], datetime]) -> PumpOutcome:
    """One pass: fan out new events, make the digests due, send what is due (up to
    SEND_BATCH, for up to PASS_BUDGET); `clock` is read for each claim, so leases start when
    each send does."""
    started = clock()
    outcome = PumpOutcome(made=events_fan_out(now=started), digests=digests_make(now=started))
    for delivery_id in deliveries_due(now=started)[:SEND_BATCH]:
        if clock() - started > PASS_BUDGET:
            break  # the next pass goes on
        status = delivery_send(delivery_id=delivery_id, now=clock())
        if status == Status.SENT:
            outcome.sent.append(delivery_id)
        elif status == Status.PENDING:
            outcome.retrying.append(delivery_id)
        elif status == Status.FAILED:
            outcome.failed.append(delivery_id)
        elif status == Status.DROPPED:
            outcome.dropped.append(delivery_id)
    return outcome


def events_fan_out(*, now: datetime) -> int:
    """Turn events not yet fanned out into deliveries: one per per-change subscription that
    matches (a team's email: one per member). Not told: a state not notified, a silenced
    regression, a member of a blamed group (its group's regression is told), an event older
    than FEDPROBE_NOTIFY_MAX_AGE_S."""
    subscriptions = list(_subscriptions(digest=False))
    recipients = _team_recipients(subscriptions)
    made = 0
    with transaction.atomic():
        done = EventFanOut.objects.filter(event=OuterRef("pk"))
        events = (
            RegressionEvent.objects.filter(~Exists(done))
            .select_related("regression", "regression__endpoint")
            .select_for_update(skip_locked=True, of=("self",))
            .order_by("id")[:FAN_OUT_BATCH]
        )
        for event in events:
            made += _fan_out(event, subscriptions, recipients, now=now)
    return made


Recipients = dict[int, list[tuple[int, str]]]  # team id: (user id, email address) of members


def _fan_out(
    event: RegressionEvent,
    subscriptions: Iterable[Subscription],
    recipients: Recipients,
    *,
    now: datetime,
) -> int:
    skipped = _not_told(event, now=now)
    matching = [] if skipped else [s for s in subscriptions if s.matches(event.regression)]
    rows = [
        Delivery(
            subscription=s, recipient_id=member, event=event, created_at=now, next_attempt_at=now
        )
        for s, member in _destinations(matching, recipients)
    ]
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    EventFanOut.objects.create(event=event, at=now, deliveries=len(rows), skipped=skipped)
    return len(rows)


def _destinations(
    subscriptions: Iterable[Subscription], recipients: Recipients
) -> Iterator[tuple[Subscription, int | None]]:
    """(subscription, member or None) for each message of one event: a team's email once per
    member, anything else once; each email address once (users' own subscriptions come first,
    so a member's own address is told by their own subscription)."""
    told: set[str] = set()
    for subscription in subscriptions:
        if subscription.channel != Subscription.Channel.EMAIL:
            yield subscription, None
        elif subscription.team_id is None:
            if _first_time(subscription.email, told):
                yield subscription, None
        else:
            for member, address in recipients.get(subscription.team_id, []):
                if _first_time(address, told):
                    yield subscription, member


def _first_time(address: str, told: set[str]) -> bool:
    key = address.strip().lower()
    if key in told:
        return False
    told.add(key)
    return True


def _not_told(event: RegressionEvent, *, now: datetime) -> str:
    regression = event.regression
    if event_kind(event) is None:
        return "state not notified"
    if regression.parent_id is not None:
        return "a member of a blamed group"
    if regression.silenced_until is not None and regression.silenced_until > event.at:
        return "silenced"
    if now - event.at > timedelta(seconds=settings.FEDPROBE_NOTIFY_MAX_AGE_S):
        return "too old"
    return ""


def digests_make(*, now: datetime) -> int:
    """At FEDPROBE_DIGEST_HOUR (UTC) and after, each digest subscription's delivery of the
    previous UTC day (a team's email: one per member), once (unique per subscription, day
    and member)."""
    if now.astimezone(UTC).hour < settings.FEDPROBE_DIGEST_HOUR:
        return 0
    day = now.astimezone(UTC).date() - timedelta(days=1)
    subscriptions = list(_subscriptions(digest=True))
    recipients = _team_recipients(subscriptions)
    made = set(
        Delivery.objects.filter(digest_day=day).values_list("subscription_id", "recipient_id")
    )
    rows = [
        Delivery(
            subscription=s, recipient_id=member, digest_day=day, created_at=now, next_attempt_at=now
        )
        for s in subscriptions
        for member in _digest_recipients(s, recipients)
        if (s.pk, member) not in made
    ]
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _digest_recipients(subscription: Subscription, recipients: Recipients) -> list[int | None]:
    if subscription.team_id is None or subscription.channel != Subscription.Channel.EMAIL:
        return [None]
    return [member for member, _ in recipients.get(subscription.team_id, [])]


def _subscriptions(*, digest: bool) -> QuerySet[Subscription]:
    """Active subscriptions of the kind, of users who may still read regressions (an active
    account with a role: one whose role was taken away is told nothing more), or of teams
    with at least one such member; users' own first."""
    may_read = Q(owner__is_superuser=True) | Q(owner__groups__name__in=ROLES)
    users = Q(may_read, owner__is_active=True)
    teams = Q(Exists(_readers().filter(team=OuterRef("team"))), team__isnull=False)
    rows = Subscription.objects.filter(users | teams, active=True, digest=digest)
    return rows.distinct().order_by(F("team_id").asc(nulls_first=True), "id")


def _readers() -> QuerySet[TeamMembership]:
    """Memberships of users who may read regressions (active, with a role)."""
    may_read = Q(user__is_superuser=True) | Q(user__groups__name__in=ROLES)
    return TeamMembership.objects.filter(may_read, user__is_active=True)


def _team_recipients(subscriptions: Iterable[Subscription]) -> Recipients:
    """For the teams of the email subscriptions among `subscriptions`: their members who may
    read regressions and have an address, by user id."""
    team_ids = {
        s.team_id
        for s in subscriptions
        if s.team_id is not None and s.channel == Subscription.Channel.EMAIL
    }
    rows = (
        _readers()
        .filter(team_id__in=team_ids)
        .exclude(user__email="")
        .values_list("team_id", "user_id", "user__email")
        .distinct()
        .order_by("team_id", "user_id")
    )
    recipients: Recipients = {}
    for team_id, user_id, address in rows:
        recipients.setdefault(team_id, []).append((user_id, address))
    return recipients


def deliveries_due(*, now: datetime) -> list[int]:
    """Deliveries to send now, oldest first: pending and due, or claimed by a worker whose
    lease ended (it died, or hangs)."""
    return list(
        Delivery.objects.filter(_due(now))
        .order_by("next_attempt_at", "id")
        .values_list("pk", flat=True)[: SEND_BATCH * 4]
    )


def _due(now: datetime) -> Q:
    return Q(status=Status.PENDING, next_attempt_at__lte=now) | Q(
        status=Status.SENDING, lease_until__lt=now
    )


def delivery_send(*, delivery_id: int, now: datetime) -> str | None:
    """Claim the delivery, send it, and record how that went; None when it was not ours to
    send (already sent, not due, or claimed by another worker)."""
    lease_until = now + timedelta(seconds=settings.FEDPROBE_NOTIFY_LEASE_S)
    claimed = Delivery.objects.filter(_due(now), pk=delivery_id).update(
        status=Status.SENDING, lease_until=lease_until, attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    delivery = Delivery.objects.select_related(
        "subscription__team", "recipient", "event__regression"
    ).get(pk=delivery_id)
    gone = _recipient_gone(delivery)
    if gone:
        with transaction.atomic():
            heir = _hand_over(delivery, now=now)
            if heir is not None and heir.team is not None:
                gone += f"; handed over to team {heir.team.name}'s subscription {heir.pk}"
            Delivery.objects.filter(pk=delivery_id, status=Status.SENDING).update(
                status=Status.DROPPED, lease_until=None, last_error=f"not sent: {gone}"
            )
        return Status.DROPPED
    try:
        _send(delivery)
    except DeliveryError as exc:
        return _failed(delivery, str(exc), permanent=exc.permanent, now=now)
    except Exception as exc:  # a bug of ours must not leave it claimed until the lease ends
        logger.exception("delivery %s: unexpected failure", delivery_id)
        return _failed(delivery, f"internal error: {type(exc).__name__}", permanent=False, now=now)
    Delivery.objects.filter(pk=delivery_id, status=Status.SENDING, lease_until=lease_until).update(
        status=Status.SENT, sent_at=now, lease_until=None, last_error=""
    )
    return Status.SENT


def _recipient_gone(delivery: Delivery) -> str:
    """Why a team member's delivery is no longer theirs ("": it is): they left the team
    since the fan-out, lost their role, or their address."""
    member = delivery.recipient
    team = delivery.subscription.team
    if member is None or team is None:
        return ""
    if not _readers().filter(team=team, user=member).exists():
        return f"{member.get_username()} is no longer in team {team.name} (or has no role)"
    if not member.email:
        return f"{member.get_username()} has no email address any more"
    return ""


def _hand_over(delivery: Delivery, *, now: datetime) -> Subscription | None:
    """A member who left the team of an event's delivery may still be subscribed through
    another of their teams, whose delivery the fan-out did not make (an address is told an
    event once): make it now, so that leaving one team does not lose them the message. The
    subscription handed to, or None (a digest, no such team, or already told)."""
    member, event = delivery.recipient, delivery.event
    if member is None or event is None or not member.email:
        return None
    told = (
        Delivery.objects.filter(event=event)
        .exclude(pk=delivery.pk)
        .exclude(status__in=(Status.DROPPED, Status.FAILED))
    )
    if (
        told.filter(recipient=member).exists()
        or told.filter(recipient__isnull=True, subscription__email__iexact=member.email).exists()
    ):
        return None
    teams = _readers().filter(user=member).values("team")
    candidates = _subscriptions(digest=False).filter(
        team__in=teams, channel=Subscription.Channel.EMAIL
    )
    for subscription in candidates.exclude(pk=delivery.subscription_id):
        if not subscription.matches(event.regression):
            continue
        _, made = Delivery.objects.get_or_create(
            event=event,
            subscription=subscription,
            recipient=member,
            defaults={"created_at": now, "next_attempt_at": now},
        )
        if made:
            return subscription
    return None


def _send(delivery: Delivery) -> None:
    message = delivery_message(delivery)
    subscription = delivery.subscription
    if subscription.channel == Subscription.Channel.EMAIL:
        to = delivery.recipient.email if delivery.recipient is not None else subscription.email
        email_send(to=to, message=message, key=delivery.idempotency_key)
        return
    body = message.body
    if subscription.format == Subscription.Format.SLACK:
        body = {"text": message.text}
    headers = {subscription.secret_header: subscription.secret} if subscription.secret else {}
    webhook_post(url=subscription.url, headers=headers, body=body, key=delivery.idempotency_key)


def delivery_message(delivery: Delivery) -> Message:
    key = delivery.idempotency_key
    if delivery.event is not None:
        kind = event_kind(delivery.event) or delivery.event.state
        return event_message(event=delivery.event, kind=kind, key=key)
    assert delivery.digest_day is not None  # the check constraint: an event or a day
    digest = digest_of(subscription=delivery.subscription, day=delivery.digest_day)
    return digest_message(digest=digest, key=key)


def _failed(delivery: Delivery, error: str, *, permanent: bool, now: datetime) -> str:
    age = now - delivery.created_at
    give_up = permanent or age >= timedelta(seconds=settings.FEDPROBE_NOTIFY_MAX_AGE_S)
    delay_s = min(
        settings.FEDPROBE_NOTIFY_RETRY_BASE_S * 2 ** max(delivery.attempts - 1, 0),
        settings.FEDPROBE_NOTIFY_RETRY_CAP_S,
    )
    status = Status.FAILED if give_up else Status.PENDING
    Delivery.objects.filter(pk=delivery.pk, status=Status.SENDING).update(
        status=status,
        lease_until=None,
        last_error=error[:2000],
        next_attempt_at=now + timedelta(seconds=delay_s),
    )
    logger.warning(
        "delivery %s to %s: %s (%s)",
        delivery.pk,
        delivery.subscription.destination,
        error,
        "given up" if give_up else f"trying again in {delay_s} s",
    )
    return status


def digest_of(*, subscription: Subscription, day: date) -> Digest:
    """The subscriber's view of `day` (UTC): regressions opened, resolved, turned tester
    fault that day, and those still open now; members of a blamed group are left out."""
    start = datetime.combine(day, time(), tzinfo=UTC)
    events = RegressionEvent.objects.filter(
        at__gte=start, at__lt=start + timedelta(days=1), regression__parent__isnull=True
    ).select_related("regression", "regression__endpoint")
    opened: dict[int, Regression] = {}
    resolved: dict[int, Regression] = {}
    faults: dict[int, Regression] = {}
    for event in events:
        kind = event_kind(event)
        chosen = {"opened": opened, "confirmed": opened, "resolved": resolved}.get(kind or "")
        if event.state == State.TESTER_FAULT:
            chosen = faults
        if chosen is not None and subscription.matches(event.regression):
            chosen[event.regression_id] = event.regression
    live = Regression.objects.filter(
        subscription.regressions(),
        state__in=(State.OPEN, State.ACKNOWLEDGED, State.RECOVERING),
        parent__isnull=True,
    ).order_by("opened_at")
    still_open = sorted(live, key=lambda r: SEVERITY_ORDER.index(r.severity))
    return Digest(
        day, list(opened.values()), list(resolved.values()), still_open, list(faults.values())
    )
