"""Pausing and resuming a campaign's schedule (the cron is kept; resuming starts from the next
slot, launching none missed while paused), and what pages and the API show of a schedule: its
next slot and its latest launches with their outcome. Also run on SQLite (marker `sqlite`)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.webapp.campaigns.test_schedules import at, scheduled, slots
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.schedules import (
    ScheduleConflict,
    _slot_launch,
    campaign_schedule_pause,
    campaign_schedule_resume,
    campaign_schedule_state,
    campaigns_launch_due,
    until_text,
)
from webapp.campaigns.services import campaign_clone

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]


def test_a_paused_campaign_keeps_its_cron_and_launches_nothing() -> None:
    campaign = scheduled("0 2 * * *")
    campaign_schedule_pause(campaign=campaign, now=at("2026-03-09 12:00"))
    assert campaigns_launch_due(now=at("2026-03-10 02:00:30")) == []
    assert campaigns_launch_due(now=at("2026-03-11 02:00:30")) == []
    campaign.refresh_from_db()
    assert (campaign.schedule, campaign.schedule_paused) == ("0 2 * * *", True)
    assert campaign.schedule_paused_at == at("2026-03-09 12:00")
    assert not campaign.runs.exists()
    assert not campaign.scheduled_launches.exists()


def test_other_campaigns_launch_while_one_is_paused() -> None:
    paused = scheduled("0 2 * * *")
    running = scheduled("0 2 * * *")
    campaign_schedule_pause(campaign=paused)
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert launch.campaign == running


def test_resuming_starts_from_the_next_slot_without_the_missed_ones() -> None:
    campaign = scheduled("0 * * * *")
    campaigns_launch_due(now=at("2026-03-10 10:00:20"))
    campaign_schedule_pause(campaign=campaign, now=at("2026-03-10 10:30"))
    # Resumed at 13:10: 11:00 to 13:00 passed while paused, all within the catch-up window.
    campaign_schedule_resume(campaign=campaign, now=at("2026-03-10 13:10"))
    assert campaigns_launch_due(now=at("2026-03-10 13:10:30")) == []
    assert campaigns_launch_due(now=at("2026-03-10 13:59:59")) == []
    (launch,) = campaigns_launch_due(now=at("2026-03-10 14:00:10"))
    assert launch.slot == at("2026-03-10 14:00")
    assert slots(campaign) == [(at("2026-03-10 10:00"), 2, ""), (at("2026-03-10 14:00"), 2, "")]
    campaign.refresh_from_db()
    assert campaign.schedule_paused_at is None
    assert campaign.schedule_resumed_at == at("2026-03-10 13:10")


def test_a_slot_at_the_instant_of_resuming_is_the_next_one() -> None:
    campaign = scheduled("0 2 * * *")
    campaign_schedule_pause(campaign=campaign, now=at("2026-03-09 12:00"))
    campaign_schedule_resume(campaign=campaign, now=at("2026-03-10 02:00"))
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert launch.slot == at("2026-03-10 02:00")


def test_a_pause_saved_during_a_pass_stops_that_pass_launching() -> None:
    campaign = scheduled("0 2 * * *")
    read_by_the_pass = Campaign.objects.get(pk=campaign.pk)
    campaign_schedule_pause(campaign=campaign)
    assert _slot_launch(read_by_the_pass, at("2026-03-10 02:00"), at("2026-03-10 02:00:30")) is None
    assert not campaign.runs.exists()


def test_pausing_twice_resuming_a_running_schedule_or_pausing_none_is_refused_by_name() -> None:
    campaign = scheduled("0 2 * * *", name="nightly")
    with pytest.raises(ScheduleConflict, match="'nightly' is not paused: its schedule is running"):
        campaign_schedule_resume(campaign=campaign)
    campaign_schedule_pause(campaign=campaign, now=at("2026-03-09 12:00"))
    with pytest.raises(
        ScheduleConflict, match=r"'nightly' is already paused \(since 2026-03-09 12:00 UTC\)"
    ):
        campaign_schedule_pause(campaign=campaign, now=at("2026-03-09 13:00"))
    campaign.refresh_from_db()
    assert campaign.schedule_paused_at == at("2026-03-09 12:00")

    unscheduled = scheduled("", name="by hand")
    with pytest.raises(ScheduleConflict, match="'by hand' has no schedule to pause"):
        campaign_schedule_pause(campaign=unscheduled)
    assert not Campaign.objects.get(pk=unscheduled.pk).schedule_paused


def test_a_clone_of_a_paused_campaign_is_not_paused() -> None:
    campaign = scheduled("0 2 * * *")
    campaign_schedule_pause(campaign=campaign)
    copy = campaign_clone(campaign=campaign, owner=User.objects.create_user("olga"))
    assert (copy.schedule, copy.schedule_paused_at, copy.schedule_resumed_at) == ("", None, None)


# What pages and the API show


def test_the_state_names_the_next_slot_in_utc_and_how_soon() -> None:
    campaign = scheduled("0 2 * * *")
    state = campaign_schedule_state(campaign=campaign, now=at("2026-03-09 21:00"))
    assert (state.cron, state.words, state.paused) == ("0 2 * * *", "every day at 02:00 UTC", False)
    assert (state.next_slot, state.next_in) == (at("2026-03-10 02:00"), "in 5 h")
    assert state.launches == []


def test_a_paused_schedule_has_no_next_slot_until_resumed() -> None:
    campaign = scheduled("0 2 * * *")
    campaign_schedule_pause(campaign=campaign, now=at("2026-03-09 12:00"))
    state = campaign_schedule_state(campaign=campaign, now=at("2026-03-09 21:00"))
    assert (state.paused, state.paused_at, state.next_slot, state.next_in) == (
        True,
        at("2026-03-09 12:00"),
        None,
        "",
    )
    campaign_schedule_resume(campaign=campaign, now=at("2026-03-09 22:00"))
    assert campaign_schedule_state(campaign=campaign, now=at("2026-03-09 22:00")).next_slot == (
        at("2026-03-10 02:00")
    )


def test_an_unscheduled_campaign_has_no_next_slot() -> None:
    state = campaign_schedule_state(campaign=scheduled(""), now=at("2026-03-09 21:00"))
    assert (state.words, state.next_slot, state.next_in) == ("", None, "")


def test_the_latest_launches_show_their_runs_by_outcome_or_the_error_in_one_query(
    settings: Any, django_assert_num_queries: Any
) -> None:
    campaign = scheduled("0 * * * *", clients=[1, 2, 3, 4, 5])
    for hour in range(8, 12):
        campaigns_launch_due(now=at(f"2026-03-10 {hour:02d}:00:10"))
    settings.FEDPROBE_MAX_MATRIX = 2
    campaigns_launch_due(now=at("2026-03-10 12:00:10"))  # refused: 5 runs > 2
    newest = campaign.scheduled_launches.get(slot=at("2026-03-10 11:00"))
    runs = list(newest.runs.order_by("pk"))
    statuses = [Run.Status.SUCCEEDED, Run.Status.PARTIAL, Run.Status.TIMEOUT, Run.Status.CANCELLED]
    for run, status in zip(runs, statuses, strict=False):
        Run.objects.filter(pk=run.pk).update(status=status)
    Run.objects.filter(pk=runs[4].pk).update(status=Run.Status.RUNNING)

    with django_assert_num_queries(1):
        state = campaign_schedule_state(campaign=campaign, now=at("2026-03-10 12:30"), launches=3)
    refused, measured, untouched = state.launches
    assert (refused.slot, refused.run_count, refused.error) == (
        at("2026-03-10 12:00"),
        0,
        "matrix: 5 runs exceed the limit of 2 per launch: use fewer values",
    )
    assert (refused.succeeded, refused.failed, refused.cancelled, refused.active) == (0, 0, 0, 0)
    assert (measured.slot, measured.run_count, measured.error) == (at("2026-03-10 11:00"), 5, "")
    assert (measured.succeeded, measured.failed, measured.cancelled, measured.active) == (
        1,
        2,
        1,
        1,
    )
    assert (untouched.slot, untouched.active, untouched.launched_at) == (
        at("2026-03-10 10:00"),
        5,
        at("2026-03-10 10:00:10"),
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.2, "in 1 s"),
        (40, "in 40 s"),
        (60, "in 1 min"),
        (719, "in 12 min"),
        (3600, "in 1 h"),
        (5 * 3600 - 100, "in 5 h"),
        (47 * 3600, "in 47 h"),
        (3 * 86400 + 7200, "in 3 days"),
    ],
)
def test_how_soon_reads_as_a_person_says_it(seconds: float, text: str) -> None:
    assert until_text(seconds) == text
