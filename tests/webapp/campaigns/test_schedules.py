"""Scheduled launches: each slot once (also with two callers at once), bounded catch-up,
nothing for slots before a campaign existed, refused launches recorded once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, connections, transaction

from tests.celery_worker import REPO, WorkerProcess
from tests.webapp.factories import CampaignFactory, TestFileFactory, VantagePointFactory
from tests.workers.test_celery import wait_until
from webapp.campaigns.dispatch import LAUNCH_DUE_CAMPAIGNS
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch
from webapp.campaigns.schedules import campaigns_launch_due
from webapp.celery import app

# Runs go to a queue no worker of the suite consumes: these tests only count them.
NOBODY = "schedules-nobody"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def scheduled(schedule: str, *, created: str = "2026-03-01 00:00", **fields: Any) -> Campaign:
    campaign = CampaignFactory(
        schedule=schedule,
        endpoints=[TestFileFactory().endpoint],
        vantage_points=[VantagePointFactory(name=NOBODY)],
        **{"clients": [1, 2], **fields},
    )
    Campaign.objects.filter(pk=campaign.pk).update(created_at=at(created))
    campaign.refresh_from_db()
    return campaign


def slots(campaign: Campaign) -> list[tuple[datetime, int, str]]:
    launches = campaign.scheduled_launches.order_by("slot")
    return [(launch.slot, launch.run_count, launch.error) for launch in launches]


@pytest.mark.django_db
def test_a_due_slot_launches_the_campaign_once_with_scheduled_runs() -> None:
    campaign = scheduled("0 2 * * *")
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert (launch.campaign, launch.slot, launch.run_count) == (campaign, at("2026-03-10 02:00"), 2)
    runs = list(campaign.runs.all())
    assert len(runs) == 2
    assert {(run.trigger, run.scheduled_launch_id) for run in runs} == {
        (Run.Trigger.SCHEDULE, launch.pk)
    }

    assert campaigns_launch_due(now=at("2026-03-10 02:00:30")) == []  # the same pass again
    assert campaigns_launch_due(now=at("2026-03-10 07:59:00")) == []  # a restarted beat
    assert campaign.runs.count() == 2

    (tomorrow,) = campaigns_launch_due(now=at("2026-03-11 02:01:00"))
    assert tomorrow.slot == at("2026-03-11 02:00")
    assert campaign.runs.count() == 4


@pytest.mark.django_db
def test_campaigns_without_a_schedule_never_launch_by_themselves() -> None:
    unscheduled = scheduled("")
    assert campaigns_launch_due(now=at("2026-03-10 02:00:30")) == []
    assert not unscheduled.runs.exists()


@pytest.mark.django_db
def test_a_new_campaign_does_not_fire_for_slots_before_it_existed() -> None:
    campaign = scheduled("0 2 * * *", created="2026-03-10 02:00:10")
    assert campaigns_launch_due(now=at("2026-03-10 02:00:30")) == []
    assert campaigns_launch_due(now=at("2026-03-10 05:00:00")) == []
    assert not campaign.runs.exists()
    (launch,) = campaigns_launch_due(now=at("2026-03-11 02:00:05"))
    assert launch.slot == at("2026-03-11 02:00")


@pytest.mark.django_db
def test_missed_slots_within_the_window_catch_up_once() -> None:
    campaign = scheduled("0 * * * *")
    campaigns_launch_due(now=at("2026-03-10 10:00:20"))
    # Beat down from 10:00 until 14:45: 11:00 to 14:00 were missed; only 14:00 launches.
    (launch,) = campaigns_launch_due(now=at("2026-03-10 14:45:00"))
    assert launch.slot == at("2026-03-10 14:00")
    assert campaigns_launch_due(now=at("2026-03-10 14:46:00")) == []
    assert slots(campaign) == [(at("2026-03-10 10:00"), 2, ""), (at("2026-03-10 14:00"), 2, "")]


@pytest.mark.django_db
def test_a_slot_missed_beyond_the_window_is_skipped(settings: Any) -> None:
    campaign = scheduled("0 2 * * *")
    assert settings.FEDPROBE_SCHEDULE_CATCHUP_S == 6 * 3600
    assert campaigns_launch_due(now=at("2026-03-10 08:00:01")) == []
    assert campaigns_launch_due(now=at("2026-03-10 23:59:00")) == []
    assert not campaign.runs.exists()

    (launch,) = campaigns_launch_due(now=at("2026-03-10 08:00:00"))  # just within
    assert launch.slot == at("2026-03-10 02:00")

    settings.FEDPROBE_SCHEDULE_CATCHUP_S = 60
    assert campaigns_launch_due(now=at("2026-03-11 02:01:01")) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"clients": [1, 2, 3]},
            "matrix: 3 runs exceed the limit of 2 per launch: use fewer values",
        ),
        ({"methods": []}, "matrix: the campaign expands into no runs"),
    ],
)
def test_a_refused_launch_is_recorded_on_its_slot_and_not_retried(
    settings: Any, fields: dict[str, Any], error: str
) -> None:
    settings.FEDPROBE_MAX_MATRIX = 2
    campaign = scheduled("0 2 * * *", **fields)
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert (launch.run_count, launch.error) == (0, error)
    assert campaigns_launch_due(now=at("2026-03-10 02:01:30")) == []
    assert slots(campaign) == [(at("2026-03-10 02:00"), 0, error)]
    assert not campaign.runs.exists()


@pytest.mark.django_db
def test_a_campaign_with_an_invalid_stored_schedule_is_skipped_and_others_launch() -> None:
    broken = scheduled("0 2 * * *")
    Campaign.objects.filter(pk=broken.pk).update(schedule="every night")
    fine = scheduled("0 2 * * *")
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert launch.campaign == fine
    assert not broken.runs.exists()


# -- two callers at once ---------------------------------------------------------------------


def in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run `target` in a thread with its own database connection; its result or exception."""
    outcome: list[object] = []

    def body() -> None:
        try:
            outcome.append(target())
        except BaseException as exc:
            outcome.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, outcome


@pytest.mark.django_db(transaction=True)
def test_two_beats_at_once_launch_each_slot_exactly_once(celery_broker_url: str) -> None:
    campaigns = [scheduled("*/5 * * * *") for _ in range(12)]
    now = at("2026-03-10 02:05:01")
    start = threading.Barrier(2)

    def beat() -> list[ScheduledLaunch]:
        start.wait()
        return campaigns_launch_due(now=now)

    callers = [in_thread(beat) for _ in range(2)]
    for thread, _ in callers:
        thread.join(60)
    claimed = [launch for _, (result,) in callers for launch in result]  # type: ignore[union-attr]
    assert sorted(launch.campaign_id for launch in claimed) == [c.pk for c in campaigns]
    for campaign in campaigns:
        assert slots(campaign) == [(at("2026-03-10 02:05"), 2, "")]
        assert campaign.runs.count() == 2


def backends_waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first_commits", [True, False])
def test_a_caller_that_meets_an_uncommitted_claim_waits_for_it(
    celery_broker_url: str, first_commits: bool
) -> None:
    """Another beat inserted the slot's row and is still launching: this caller's insert
    waits on the unique index, then skips (the other committed) or launches (it rolled back)."""
    campaign = scheduled("0 2 * * *")
    now = at("2026-03-10 02:00:30")
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(
                "INSERT INTO campaigns_scheduledlaunch (campaign_id, slot, launched_at, "
                "run_count, error) VALUES (%s, %s, %s, 0, '')",
                [campaign.pk, at("2026-03-10 02:00"), now],
            )
            thread, outcome = in_thread(lambda: campaigns_launch_due(now=now))
            deadline = time.monotonic() + 30
            while not backends_waiting_for_a_lock():
                assert time.monotonic() < deadline, "the second caller never waited"
                time.sleep(0.05)
            cursor.execute("COMMIT" if first_commits else "ROLLBACK")
        thread.join(30)
    finally:
        other.close()
    (result,) = outcome
    assert isinstance(result, list)
    if first_commits:
        assert result == []
        assert not campaign.runs.exists()
    else:
        assert [launch.slot for launch in result] == [at("2026-03-10 02:00")]
        assert campaign.runs.count() == 2
    assert campaign.scheduled_launches.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_scheduled_launch_leaves_its_slot_free(celery_broker_url: str) -> None:
    campaign = scheduled("0 2 * * *")

    def launch_then_fail() -> None:
        with transaction.atomic():
            campaigns_launch_due(now=at("2026-03-10 02:00:30"))
            raise RuntimeError("the beat's transaction failed")

    with pytest.raises(RuntimeError):
        launch_then_fail()
    assert not campaign.scheduled_launches.exists()
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:01:30"))
    assert launch.run_count == 2


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FEDPROBE_SCHEDULE_CATCHUP_S", "0"),
        ("FEDPROBE_SCHEDULE_CATCHUP_S", "6h"),
        ("FEDPROBE_RESEND_AFTER_S", "-1"),
        ("FEDPROBE_RESEND_MAX_SENDS", "0"),
    ],
)
def test_a_malformed_schedule_or_resend_setting_stops_start_up_naming_it(
    name: str, value: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDPROBE_")}
    env |= {"DJANGO_SETTINGS_MODULE": "webapp.settings", name: value}
    done = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.INSTALLED_APPS"],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and name in done.stderr


def test_beat_s_task_launches_due_campaigns_on_the_control_worker(
    celery_worker: WorkerProcess,
) -> None:
    campaign = scheduled("* * * * *", created="2020-01-01 00:00")
    app.send_task(LAUNCH_DUE_CAMPAIGNS)
    wait_until(campaign.scheduled_launches.exists, 30, "a slot launched", celery_worker)
    (launch,) = campaign.scheduled_launches.all()
    assert launch.run_count == 2
    assert set(campaign.runs.values_list("trigger", "scheduled_launch")) == {
        (Run.Trigger.SCHEDULE, launch.pk)
    }
