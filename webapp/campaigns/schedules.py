"""Launching campaigns by their cron schedule (UTC), exactly once per slot.

Beat calls `campaigns_launch_due` every minute. For each scheduled campaign only the latest
slot at or before now counts, and only if it lies within the catch-up window
(FEDPROBE_SCHEDULE_CATCHUP_S) and not before the campaign was created: a beat that was down
for a night launches the missed slot once, not once per missed slot. A slot is claimed by
inserting its ScheduledLaunch row (unique per campaign and slot) in the transaction that
creates the runs, so two beats, or a beat restarted within the minute, launch it once.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, transaction

from webapp.campaigns.cron import CronError, parse_cron
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch
from webapp.campaigns.services import campaign_launch

log = logging.getLogger(__name__)


def campaign_due_slot(*, campaign: Campaign, now: datetime) -> datetime | None:
    """The slot the campaign should launch for at `now`: its latest within the catch-up
    window and not before the campaign existed, or None."""
    try:
        cron = parse_cron(campaign.schedule)
    except CronError as exc:
        # Stored before schedules were validated: say so once a minute rather than guess.
        log.error("campaign %s has an invalid schedule %r: %s", campaign.pk, campaign.schedule, exc)
        return None
    window_start = now - timedelta(seconds=settings.FEDPROBE_SCHEDULE_CATCHUP_S)
    return cron.latest(at_or_before=now, not_before=max(window_start, campaign.created_at))


def campaigns_launch_due(*, now: datetime) -> list[ScheduledLaunch]:
    """Launch every scheduled campaign whose due slot is not launched yet; the slots this
    call claimed (with the runs they launched, or the error that stopped them)."""
    claimed = []
    for campaign in Campaign.objects.exclude(schedule="").order_by("pk"):
        slot = campaign_due_slot(campaign=campaign, now=now)
        if slot is None or ScheduledLaunch.objects.filter(campaign=campaign, slot=slot).exists():
            continue
        launch = _slot_launch(campaign, slot, now)
        if launch is not None:
            claimed.append(launch)
    return claimed


def _slot_launch(campaign: Campaign, slot: datetime, now: datetime) -> ScheduledLaunch | None:
    """Claim the slot and launch in one transaction (runs are enqueued once it commits);
    None if another caller holds the slot."""
    with transaction.atomic():
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
            raise  # the claim rolls back with it: the next pass tries the slot again
        except Exception as exc:
            # Retrying a refused launch each minute would only repeat the refusal.
            launch.error = _error_text(exc)
            launch.save(update_fields=["error"])
            log.log(
                logging.WARNING if isinstance(exc, ValidationError) else logging.ERROR,
                "campaign %s: slot %s launched nothing: %s",
                campaign.pk,
                slot,
                launch.error,
                exc_info=not isinstance(exc, ValidationError),
            )
            return launch
        Run.objects.filter(pk__in=[run.pk for run in runs]).update(scheduled_launch=launch)
        launch.run_count = len(runs)
        launch.save(update_fields=["run_count"])
    log.info("campaign %s: slot %s launched %d runs", campaign.pk, slot, len(runs))
    return launch


def _error_text(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    return f"{type(exc).__name__}: {exc}"
