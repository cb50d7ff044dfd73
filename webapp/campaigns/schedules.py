"""Launching campaigns by their cron schedule (in the campaign's zone), exactly once per slot.

Beat calls `campaigns_launch_due` every minute. For each scheduled campaign only the latest
slot whose launch time (the slot plus its slip, `Campaign.schedule_launch_at`) has come
counts, and only if that lies within the catch-up window
(FEDPROBE_SCHEDULE_CATCHUP_S) and not before the campaign was created: a beat that was down
for a night launches the missed slot once, not once per missed slot. A slot is claimed by
inserting its ScheduledLaunch row (unique per campaign and slot) in the transaction that
creates the runs, so two beats, or a beat restarted within the minute, launch it once.
A launch that fails records why on its slot (`ScheduledLaunch.error`; the watch raises a
tester fault from it): a refusal, an exception, or the database refusing the runs; only a
database that went away (OperationalError, InterfaceError) leaves the slot unclaimed for the
next pass to try again.

A paused campaign (`campaign_schedule_pause`) keeps its cron and launches nothing; resuming
(`campaign_schedule_resume`) starts from the next slot: the slots that passed while it was
paused, even within the catch-up window, are not launched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    transaction,
)
from django.db.models import Count, Q
from django.utils import timezone

from webapp.campaigns.cron import CronError, parse_cron, time_zone
from webapp.campaigns.estimates import ScheduleCost, campaign_cost
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch
from webapp.campaigns.services import campaign_launch

log = logging.getLogger(__name__)


def campaign_due_slot(*, campaign: Campaign, now: datetime) -> datetime | None:
    """The slot the campaign should launch for at `now`: its latest (read in its zone) whose
    launch time (the slot plus its slip) has come, within the catch-up window, and not before
    the campaign existed or was resumed; or None."""
    try:
        cron, zone = parse_cron(campaign.schedule), time_zone(campaign.schedule_tz)
    except CronError as exc:
        # Stored before schedules were validated: say so once a minute rather than guess.
        log.error(
            "campaign %s has an invalid schedule %r (%s): %s",
            campaign.pk,
            campaign.schedule,
            campaign.schedule_tz,
            exc,
        )
        return None
    window_start = now - timedelta(seconds=settings.FEDPROBE_SCHEDULE_CATCHUP_S)
    slip = timedelta(seconds=campaign.schedule_slip_s)
    since = max(
        filter(None, (window_start - slip, campaign.created_at, campaign.schedule_resumed_at))
    )
    slot = cron.latest(at_or_before=now, not_before=since, zone=zone)
    if slot is not None and campaign.schedule_launch_at(slot) > now:
        # Its slip has not passed yet: the slot before it (a slip is at most the interval).
        slot = cron.latest(at_or_before=slot - _INSTANT, not_before=since, zone=zone)
    if slot is None or not window_start <= campaign.schedule_launch_at(slot) <= now:
        return None
    return slot


_INSTANT = timedelta(microseconds=1)


def campaigns_launch_due(*, now: datetime) -> list[ScheduledLaunch]:
    """Launch every scheduled campaign whose due slot is not launched yet; the slots this
    call claimed (with the runs they launched, or the error that stopped them)."""
    claimed = []
    scheduled = Campaign.objects.exclude(schedule="").filter(schedule_paused_at__isnull=True)
    for campaign in scheduled.order_by("pk"):
        slot = campaign_due_slot(campaign=campaign, now=now)
        if slot is None or ScheduledLaunch.objects.filter(campaign=campaign, slot=slot).exists():
            continue
        try:
            launch = _slot_launch(campaign, slot, now)
        except (OperationalError, InterfaceError):
            raise  # the database went away: the task tries again, and the slot with it
        except DatabaseError as exc:
            # The database refused the launch itself (a constraint, a trigger, bad data):
            # trying each minute would repeat it, and the campaigns after this one would
            # never launch. The claim rolled back with the runs: claim the slot with why.
            launch = _slot_refused(campaign, slot, now, exc)
        if launch is not None:
            claimed.append(launch)
    return claimed


def _slot_launch(campaign: Campaign, slot: datetime, now: datetime) -> ScheduledLaunch | None:
    """Claim the slot and launch in one transaction (runs are enqueued once it commits);
    None if another caller holds the slot."""
    with transaction.atomic():
        # Paused since this pass read it. (Not a row lock: the claim's deferred foreign key
        # check would wait for it at another claimer's commit, and deadlock.)
        if not Campaign.objects.filter(pk=campaign.pk, schedule_paused_at__isnull=True).exists():
            return None
        try:
            with transaction.atomic():
                launch = ScheduledLaunch.objects.create(
                    campaign=campaign, slot=slot, launched_at=now
                )
        except IntegrityError:
            return None
        try:
            with transaction.atomic():
                runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.SCHEDULE)
        except DatabaseError:
            raise  # the claim rolls back with it (campaigns_launch_due says what next)
        except Exception as exc:
            # Retrying a refused launch each minute would only repeat the refusal.
            launch.error = _error_text(exc)
            launch.save(update_fields=["error"])
            log.log(
                logging.WARNING
                if isinstance(exc, ValidationError | PermissionDenied)
                else logging.ERROR,
                "campaign %s: slot %s launched nothing: %s",
                campaign.pk,
                slot,
                launch.error,
                exc_info=not isinstance(exc, ValidationError | PermissionDenied),
            )
            return launch
        Run.objects.filter(pk__in=[run.pk for run in runs]).update(scheduled_launch=launch)
        launch.run_count = len(runs)
        launch.save(update_fields=["run_count"])
    log.info("campaign %s: slot %s launched %d runs", campaign.pk, slot, len(runs))
    return launch


def _slot_refused(
    campaign: Campaign, slot: datetime, now: datetime, exc: DatabaseError
) -> ScheduledLaunch | None:
    """Claim the slot with the database's refusal as its error; None if another caller
    holds it."""
    log.error("campaign %s: slot %s launched nothing", campaign.pk, slot, exc_info=exc)
    try:
        with transaction.atomic():
            return ScheduledLaunch.objects.create(
                campaign=campaign, slot=slot, launched_at=now, error=_error_text(exc)
            )
    except IntegrityError:
        return None


def _error_text(exc: Exception) -> str:
    if isinstance(exc, DatabaseError):
        # The server's primary message only: its DETAIL and CONTEXT lines ("Failing row
        # contains (...)", "Key (...)=(...)") quote the refused rows' values, and this text
        # is shown on the slot, in the watch's alert and in its notifications.
        primary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"the database refused the launch ({type(exc).__name__}): {primary}"
    if isinstance(exc, ValidationError) and hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    return f"{type(exc).__name__}: {exc}"


class ScheduleConflict(Exception):
    """A pause of a paused schedule, a resume of a running one, or a pause without one."""


def campaign_schedule_pause(*, campaign: Campaign, now: datetime | None = None) -> Campaign:
    """Stop launching the campaign's slots, keeping its cron. ScheduleConflict if it has no
    schedule or is paused already."""
    if not campaign.schedule:
        raise ScheduleConflict(f"{campaign.name!r} has no schedule to pause")
    paused_at = now or timezone.now()
    changed = Campaign.objects.filter(pk=campaign.pk, schedule_paused_at__isnull=True).update(
        schedule_paused_at=paused_at
    )
    campaign.refresh_from_db(fields=["schedule_paused_at", "schedule_resumed_at"])
    if not changed:
        since = f"{campaign.schedule_paused_at:%Y-%m-%d %H:%M} UTC"
        raise ScheduleConflict(f"{campaign.name!r} is already paused (since {since})")
    log.info("campaign %s: schedule paused", campaign.pk)
    return campaign


def campaign_schedule_resume(*, campaign: Campaign, now: datetime | None = None) -> Campaign:
    """Launch the campaign's slots again from the next one: none that passed while it was
    paused. ScheduleConflict if it is not paused."""
    resumed_at = now or timezone.now()
    changed = Campaign.objects.filter(pk=campaign.pk, schedule_paused_at__isnull=False).update(
        schedule_paused_at=None, schedule_resumed_at=resumed_at
    )
    campaign.refresh_from_db(fields=["schedule_paused_at", "schedule_resumed_at"])
    if not changed:
        raise ScheduleConflict(f"{campaign.name!r} is not paused: its schedule is running")
    log.info("campaign %s: schedule resumed", campaign.pk)
    return campaign


@dataclass(frozen=True)
class LaunchOutcome:
    """One slot a schedule launched: its runs so far by outcome, or why it launched none."""

    slot: datetime
    launched_at: datetime
    run_count: int
    error: str
    succeeded: int
    failed: int  # failed, partial or timed out
    cancelled: int
    active: int  # still queued or running


@dataclass(frozen=True)
class ScheduleState:
    """A campaign's schedule as pages and the API show it."""

    cron: str
    words: str
    paused: bool
    paused_at: datetime | None
    next_slot: datetime | None  # the next launch (slip applied); None when paused,
    # unscheduled or never again
    next_in: str  # "in 5 h"
    next_launches: list[datetime]  # the next NEXT_LAUNCHES launch times (UTC, slip applied)
    zone: str  # the IANA zone the cron is read in
    cost: ScheduleCost | None  # bytes and run-minutes per night and month, if asked for
    launches: list[LaunchOutcome]


LAUNCHES_SHOWN = 5


def campaign_schedule_state(
    *,
    campaign: Campaign,
    now: datetime | None = None,
    launches: int = LAUNCHES_SHOWN,
    with_cost: bool = False,
) -> ScheduleState:
    """The schedule in words, its next launches (none while paused) and its latest
    `launches` slots with their outcome, newest first (one query); `with_cost`: what it costs
    too (campaign_cost: its runs' estimates, three queries more)."""
    now = now or timezone.now()
    next_launches = campaign.schedule_next_launches(now)
    next_slot = next_launches[0] if next_launches else None
    return ScheduleState(
        cron=campaign.schedule,
        words=campaign.schedule_words,
        paused=campaign.schedule_paused,
        paused_at=campaign.schedule_paused_at,
        next_slot=next_slot,
        next_in=until_text((next_slot - now).total_seconds()) if next_slot else "",
        next_launches=next_launches,
        zone=campaign.schedule_tz,
        cost=campaign_cost(campaign=campaign, now=now) if with_cost else None,
        launches=scheduled_launch_outcomes(campaign_id=campaign.pk, limit=launches),
    )


def scheduled_launch_outcomes(*, campaign_id: int, limit: int) -> list[LaunchOutcome]:
    rows = (
        ScheduledLaunch.objects.filter(campaign_id=campaign_id)
        .annotate(
            succeeded=Count("runs", filter=Q(runs__status=Run.Status.SUCCEEDED)),
            failed=Count("runs", filter=Q(runs__status__in=Run.Status.WITH_FAILURES)),
            cancelled=Count("runs", filter=Q(runs__status=Run.Status.CANCELLED)),
            active=Count("runs", filter=Q(runs__status__in=Run.Status.ACTIVE)),
        )
        .order_by("-slot", "-id")
        .values(*(field.name for field in fields(LaunchOutcome)))[:limit]
    )
    return [LaunchOutcome(**row) for row in rows]


def until_text(seconds: float) -> str:
    """How long until a time, as a person says it: "in 40 s", "in 12 min", "in 5 h",
    "in 3 days"."""
    if seconds < 60:
        return f"in {max(1, round(seconds))} s"
    if seconds < 3600:
        return f"in {round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"in {round(seconds / 3600)} h"
    return f"in {round(seconds / 86400)} days"
