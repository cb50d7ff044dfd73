"""Schedules in a time zone with a slip: each slot once across both daylight saving time
transitions (Europe/Zurich, America/Chicago), a spring-forward slot at the first valid time
after the gap, a fall-back slot at its first occurrence, slips bounded and the same for a slot
on every pass and host, the next five launches, and 400s naming schedule_tz and
schedule_slip_s. Frozen clocks throughout (`now=`)."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.celery_worker import REPO
from tests.webapp.campaigns.test_campaign_form_defaults import basic_fields
from tests.webapp.campaigns.test_schedules import NOBODY, at, in_thread
from tests.webapp.factories import (
    CampaignFactory,
    TestFileFactory,
    VantagePointFactory,
    api_for,
    page_for,
    user,
)
from webapp.campaigns.cron import parse_cron, slip_error, slot_slip
from webapp.campaigns.cron_words import cron_words
from webapp.campaigns.models import Campaign, ScheduledLaunch
from webapp.campaigns.schedules import campaigns_launch_due

ZURICH = ZoneInfo("Europe/Zurich")
CHICAGO = ZoneInfo("America/Chicago")


def slots_of(cron: str, zone: ZoneInfo, start: str, count: int) -> list[datetime]:
    schedule, moment, found = parse_cron(cron), at(start), []
    for _ in range(count):
        following = schedule.next_after(moment, zone=zone)
        assert following is not None
        found.append(following)
        moment = following
    return found


# -- the cron read in a zone ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "zone", "start", "expected"),
    [
        # Zurich springs forward on 2026-03-29 at 02:00 CET -> 03:00 CEST: 02:30 does not
        # exist, the slot fires at 03:00 CEST (01:00 UTC), once.
        (
            "30 2 * * *",
            ZURICH,
            "2026-03-27 12:00",
            ["2026-03-28 01:30", "2026-03-29 01:00", "2026-03-30 00:30"],
        ),
        # Zurich falls back on 2026-10-25 at 03:00 CEST -> 02:00 CET: 02:30 happens twice;
        # the slot fires at the first (00:30 UTC), not again at 01:30 UTC.
        (
            "30 2 * * *",
            ZURICH,
            "2026-10-24 12:00",
            ["2026-10-25 00:30", "2026-10-26 01:30", "2026-10-27 01:30"],
        ),
        # Chicago springs forward on 2026-03-08 at 02:00 CST -> 03:00 CDT (08:00 UTC).
        (
            "30 2 * * *",
            CHICAGO,
            "2026-03-06 12:00",
            ["2026-03-07 08:30", "2026-03-08 08:00", "2026-03-09 07:30"],
        ),
        # Chicago falls back on 2026-11-01 at 02:00 CDT -> 01:00 CST: 01:30 once (CDT).
        (
            "30 1 * * *",
            CHICAGO,
            "2026-10-31 00:00",
            ["2026-10-31 06:30", "2026-11-01 06:30", "2026-11-02 07:30"],
        ),
        # Four slots in the gap collapse into one at the transition.
        (
            "*/15 2 * * *",
            ZURICH,
            "2026-03-28 23:00",
            ["2026-03-29 01:00", "2026-03-30 00:00", "2026-03-30 00:15"],
        ),
    ],
)
def test_a_zone_s_slots_fire_once_across_daylight_saving_time(
    cron: str, zone: ZoneInfo, start: str, expected: list[str]
) -> None:
    found = slots_of(cron, zone, start, len(expected))
    assert found == [at(slot) for slot in expected]
    # latest() agrees with next_after() on each of them.
    schedule = parse_cron(cron)
    for slot in found:
        assert schedule.latest(at_or_before=slot, not_before=slot, zone=zone) == slot


def test_a_zone_s_wall_time_stays_put_while_its_utc_time_moves() -> None:
    nights = slots_of("0 6 * * *", ZURICH, "2026-03-27 12:00", 4)
    assert [slot.astimezone(ZURICH).hour for slot in nights] == [6, 6, 6, 6]
    assert [slot.hour for slot in nights] == [5, 4, 4, 4]  # CET, then CEST from the 29th


def test_the_schedule_in_words_names_its_zone() -> None:
    assert cron_words("0 2 * * *", zone="Europe/Zurich") == "every day at 02:00 Europe/Zurich"
    assert cron_words("0 */2 * * *", zone="America/Chicago") == "every 2 hours"
    assert cron_words("30 1-23/2 * * *", zone="America/Chicago") == (
        "every 2 hours from 01:30 America/Chicago"
    )
    assert (
        CampaignFactory.build(schedule="30 6 * * 1", schedule_tz="Asia/Tokyo").schedule_words
        == "every Monday at 06:30 Asia/Tokyo"
    )


# -- slips -------------------------------------------------------------------------------------


def test_a_slip_stays_within_its_bound_and_spreads_slots_out() -> None:
    slots = slots_of("0 2 * * *", ZURICH, "2026-01-01 00:00", 200)
    delays = [slot_slip(campaign_id=7, slot=slot, slip_s=900) for slot in slots]
    assert all(timedelta(0) <= delay <= timedelta(seconds=900) for delay in delays)
    assert all(delay.microseconds == 0 for delay in delays)
    assert len(set(delays)) > 100  # spread out, not one fixed delay
    campaigns = {slot_slip(campaign_id=c, slot=slots[0], slip_s=900) for c in range(100)}
    assert len(campaigns) > 50  # a hundred campaigns are not released at one second
    assert slot_slip(campaign_id=7, slot=slots[0], slip_s=0) == timedelta(0)


def test_a_slot_s_slip_is_the_same_on_every_pass_and_in_every_process() -> None:
    slot = at("2026-03-29 01:00")
    here = slot_slip(campaign_id=42, slot=slot, slip_s=3600)
    assert here == slot_slip(campaign_id=42, slot=slot.astimezone(ZURICH), slip_s=3600)
    # Another interpreter (another PYTHONHASHSEED, as another host's beat) gets the same.
    code = (
        "from datetime import datetime, UTC;"
        "from webapp.campaigns.cron import slot_slip;"
        "print(slot_slip(campaign_id=42, slot=datetime(2026, 3, 29, 1, tzinfo=UTC),"
        " slip_s=3600).total_seconds())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert float(other.stdout) == here.total_seconds()


@pytest.mark.parametrize(
    ("cron", "slip_s", "refused"),
    [
        ("*/15 * * * *", 900, False),
        ("*/15 * * * *", 901, True),
        ("0 2 * * *", 86400, False),
        ("0 1,23 * * *", 7200, False),  # 23:00 -> 01:00 is the shortest: 2 h
        ("0 1,23 * * *", 7201, True),
        ("0 6 * * 1,3", 86400, False),  # two days apart at least, but a day is the maximum
        ("0 2 * * *", 86401, True),
        ("", 600, False),
    ],
)
def test_a_slip_longer_than_the_schedule_s_shortest_interval_is_refused(
    cron: str, slip_s: int, refused: bool
) -> None:
    assert (slip_error(schedule=cron, slip_s=slip_s) is not None) == refused


# -- the dispatcher -----------------------------------------------------------------------------


def zoned(schedule: str, zone: str, *, slip_s: int = 0, created: str = "2026-01-01") -> Campaign:
    campaign = CampaignFactory(
        schedule=schedule,
        schedule_tz=zone,
        schedule_slip_s=slip_s,
        endpoints=[TestFileFactory().endpoint],
        vantage_points=[VantagePointFactory(name=NOBODY)],
    )
    Campaign.objects.filter(pk=campaign.pk).update(created_at=at(created))
    campaign.refresh_from_db()
    return campaign


def beat_every_minute(start: str, hours: int) -> None:
    moment = at(start)
    for _ in range(hours * 60):
        campaigns_launch_due(now=moment)
        moment += timedelta(minutes=1)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("zone", "cron", "night", "slot"),
    [
        ("Europe/Zurich", "30 2 * * *", "2026-03-28 23:30", "2026-03-29 01:00"),  # spring
        ("Europe/Zurich", "30 2 * * *", "2026-10-24 23:30", "2026-10-25 00:30"),  # fall
        ("America/Chicago", "30 2 * * *", "2026-03-08 07:00", "2026-03-08 08:00"),  # spring
        ("America/Chicago", "30 1 * * *", "2026-11-01 05:30", "2026-11-01 06:30"),  # fall
    ],
)
def test_a_beat_each_minute_through_a_dst_night_launches_its_slot_once(
    zone: str, cron: str, night: str, slot: str
) -> None:
    campaign = zoned(cron, zone)
    beat_every_minute(night, hours=3)  # through the gap, or both passes of the repeated hour
    launches = list(campaign.scheduled_launches.values_list("slot", "launched_at"))
    assert launches == [(at(slot), at(slot))]


@pytest.mark.django_db
def test_a_slot_launches_at_its_slip_and_not_before() -> None:
    campaign = zoned("0 2 * * *", "Europe/Zurich", slip_s=1800)
    slot = at("2026-06-10 00:00")  # 02:00 CEST
    launch_at = campaign.schedule_launch_at(slot)
    assert slot <= launch_at <= slot + timedelta(seconds=1800)
    assert campaign.schedule_next_launches(slot - timedelta(hours=1))[0] == launch_at
    # The slot has passed but not its slip: it is still the next launch, and nothing runs.
    assert campaign.schedule_next_launches(slot)[0] == launch_at
    assert campaigns_launch_due(now=launch_at - timedelta(seconds=1)) == []
    (launch,) = campaigns_launch_due(now=launch_at)
    assert (launch.slot, launch.launched_at) == (slot, launch_at)
    assert campaigns_launch_due(now=launch_at + timedelta(minutes=5)) == []
    assert campaign.schedule_next_launches(launch_at)[0] > slot + timedelta(hours=23)


@pytest.mark.django_db
def test_slipped_slots_through_a_dst_night_each_launch_once_at_their_own_time() -> None:
    campaign = zoned("0 * * * *", "America/Chicago", slip_s=3600)
    beat_every_minute("2026-03-08 04:00", hours=8)  # 22:00 CST to 05:00 CDT
    launches = list(campaign.scheduled_launches.order_by("slot"))
    # Every slot whose slipped launch came in those hours, once, at its own time; the local
    # 02:00 that does not exist is the 03:00 slot (08:00 UTC), launched once.
    first = launches[0].slot
    assert at("2026-03-08 03:00") <= first <= at("2026-03-08 04:00")
    expected = slots_of(
        "0 * * * *", CHICAGO, f"{first - timedelta(seconds=1):%Y-%m-%d %H:%M:%S}", 12
    )
    assert [launch.slot for launch in launches] == expected[: len(launches)]
    assert len(launches) >= 7
    for launch in launches:
        # Due before the first beat of the test: caught up at once; else within its minute.
        due = max(campaign.schedule_launch_at(launch.slot), at("2026-03-08 04:00"))
        assert timedelta(0) <= launch.launched_at - due < timedelta(minutes=1)


@pytest.mark.django_db
def test_the_next_five_launches_follow_the_zone_and_the_slip() -> None:
    campaign = zoned("30 2 * * *", "Europe/Zurich", slip_s=600)
    launches = campaign.schedule_next_launches(at("2026-03-27 12:00"))
    slots = slots_of("30 2 * * *", ZURICH, "2026-03-27 12:00", 5)
    assert launches == [campaign.schedule_launch_at(slot) for slot in slots]
    assert launches == sorted(launches)
    assert all(launch.tzinfo == UTC for launch in launches)
    campaign.schedule_paused_at = at("2026-03-27 00:00")
    assert campaign.schedule_next_launches(at("2026-03-27 12:00")) == []


# -- two dispatchers racing -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_dispatchers_racing_for_a_dst_slot_with_a_slip_claim_it_once(
    celery_broker_url: str,
) -> None:
    campaigns = [zoned("30 2 * * *", "Europe/Zurich", slip_s=3600) for _ in range(8)]
    now = at("2026-03-29 02:00:30")  # past every slip of the 03:00 CEST slot (01:00 UTC)
    start = threading.Barrier(2)

    def dispatcher() -> list[ScheduledLaunch]:
        start.wait()
        return campaigns_launch_due(now=now)

    racers = [in_thread(dispatcher) for _ in range(2)]
    for thread, _ in racers:
        thread.join(60)
    claimed = [launch for _, (result,) in racers for launch in result]  # type: ignore[union-attr]
    assert sorted(launch.campaign_id for launch in claimed) == [c.pk for c in campaigns]
    for campaign in campaigns:
        assert list(campaign.scheduled_launches.values_list("slot", flat=True)) == [
            at("2026-03-29 01:00")
        ]
        assert campaign.runs.count() == campaign.matrix_size()


# -- the API and the pages ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_api_gives_the_zone_the_slip_and_the_next_five_launches() -> None:
    olga = user("olga")
    campaign = CampaignFactory(
        owner=olga, schedule="0 2 * * *", schedule_tz="Europe/Zurich", schedule_slip_s=300
    )
    body = api_for(olga).get(f"/api/v1/campaigns/{campaign.pk}/").json()
    assert (body["schedule_tz"], body["schedule_slip_s"]) == ("Europe/Zurich", 300)
    assert body["schedule_words"] == "every day at 02:00 Europe/Zurich"
    launches = [datetime.fromisoformat(text) for text in body["next_launches"]]
    assert len(launches) == 5
    assert all(text.endswith("Z") for text in body["next_launches"])
    assert launches == sorted(launches)
    assert body["next_launch_at"] == body["next_launches"][0]
    for launch in launches:
        local = (launch - timedelta(seconds=launch.second)).astimezone(ZURICH)
        assert (local.hour, 0 <= local.minute <= 5) == (2, True)
    schedule = api_for(olga).get(f"/api/v1/campaigns/{campaign.pk}/schedule/").json()
    assert (schedule["zone"], schedule["next_launches"]) == ("Europe/Zurich", body["next_launches"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule_tz": "Europe/Atlantis"}, "schedule_tz"),
        ({"schedule_tz": "../../etc/passwd"}, "schedule_tz"),
        ({"schedule_slip_s": 901}, "schedule_slip_s"),
        ({"schedule": "0 * * * *", "schedule_slip_s": 3601}, "schedule_slip_s"),
        ({"schedule_slip_s": -1}, "schedule_slip_s"),
    ],
)
def test_a_bad_zone_or_slip_is_a_400_naming_it_and_changes_nothing(
    change: dict[str, Any], field: str
) -> None:
    olga = user("olga")
    campaign = CampaignFactory(owner=olga, schedule="*/15 * * * *", schedule_tz="UTC")
    answer = api_for(olga).patch(f"/api/v1/campaigns/{campaign.pk}/", change, format="json")
    assert answer.status_code == 400, answer.content
    assert list(answer.json()) == [field]
    campaign.refresh_from_db()
    assert (campaign.schedule, campaign.schedule_tz, campaign.schedule_slip_s) == (
        "*/15 * * * *",
        "UTC",
        0,
    )


@pytest.mark.django_db
def test_the_campaign_page_shows_the_zone_and_the_next_launches() -> None:
    olga = user("olga")
    campaign = CampaignFactory(owner=olga, schedule="0 2 * * *", schedule_tz="America/Chicago")
    page = page_for(olga).get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "every day at 02:00 America/Chicago" in page
    assert page.count('<li><time datetime="') == 5
    first = campaign.schedule_next_launches(datetime.now(UTC))[0]
    assert f"{first:%Y-%m-%d %H:%M}" in page


@pytest.mark.django_db
def test_the_form_s_preview_lists_the_next_launches_and_refuses_a_long_slip() -> None:
    client = page_for(user("olga"))
    fields = {**basic_fields(), "schedule": "30 2 * * *", "schedule_tz": "Europe/Zurich"}
    page = client.post("/campaigns/new/", {**fields, "preview": "1"}).content.decode()
    assert "Next launches" in page
    assert page.count('<li><time datetime="') == 5
    assert not Campaign.objects.exists()
    refused = client.post(
        "/campaigns/new/", {**fields, "schedule_slip_s": "86401", "save": "1"}
    ).content.decode()
    assert "longer than the schedule" in refused or "at most 86400" in refused
    assert not Campaign.objects.exists()
    unknown = client.post("/campaigns/new/", {**fields, "schedule_tz": "Mars/Olympus", "save": "1"})
    assert "not an IANA time zone" in unknown.content.decode()
    assert not Campaign.objects.exists()
