"""The API of a campaign's schedule: pause and resume (its owner or an admin; 409 naming the
state it is already in), the schedule in words and its next slot on every campaign, and
GET campaigns/{id}/schedule/ with the latest launches and their outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.webapp.factories import CampaignFactory, RunFactory, api_for, user
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch

pytestmark = pytest.mark.django_db


def nightly(owner: User | None = None, schedule: str = "0 2 * * *") -> Campaign:
    return CampaignFactory(name="nightly", schedule=schedule, owner=owner)


def test_the_owner_pauses_and_resumes_keeping_the_cron() -> None:
    olga = user("olga")
    campaign = nightly(olga)
    api = api_for(olga)

    paused = api.post(f"/api/v1/campaigns/{campaign.pk}/pause/")
    assert paused.status_code == 200, paused.content
    body = paused.json()
    assert (body["cron"], body["words"], body["paused"]) == (
        "0 2 * * *",
        "every day at 02:00 UTC",
        True,
    )
    assert body["paused_at"] is not None
    assert (body["next_slot"], body["next_in"], body["launches"]) == (None, "", [])
    detail = api.get(f"/api/v1/campaigns/{campaign.pk}/").json()
    assert (detail["schedule"], detail["schedule_paused"], detail["next_launch_at"]) == (
        "0 2 * * *",
        True,
        None,
    )

    resumed = api.post(f"/api/v1/campaigns/{campaign.pk}/resume/")
    assert resumed.status_code == 200, resumed.content
    assert (resumed.json()["paused"], resumed.json()["paused_at"]) == (False, None)
    assert resumed.json()["next_slot"] is not None
    campaign.refresh_from_db()
    assert (campaign.schedule, campaign.schedule_paused) == ("0 2 * * *", False)
    assert campaign.schedule_resumed_at is not None


def test_pausing_a_paused_schedule_or_resuming_a_running_one_is_409_naming_the_state() -> None:
    admin = user("ada", "admin")
    campaign = nightly(user("olga"))
    api = api_for(admin)
    again = api.post(f"/api/v1/campaigns/{campaign.pk}/resume/")
    assert again.status_code == 409
    assert again.json() == {
        "detail": "'nightly' is not paused: its schedule is running",
        "schedule_paused": False,
    }
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/pause/").status_code == 200
    twice = api.post(f"/api/v1/campaigns/{campaign.pk}/pause/")
    assert twice.status_code == 409
    assert twice.json()["detail"].startswith("'nightly' is already paused (since ")
    assert twice.json()["schedule_paused"] is True


def test_a_campaign_without_a_schedule_has_nothing_to_pause() -> None:
    olga = user("olga")
    campaign = nightly(olga, schedule="")
    answer = api_for(olga).post(f"/api/v1/campaigns/{campaign.pk}/pause/")
    assert answer.status_code == 409
    assert answer.json()["detail"] == "'nightly' has no schedule to pause"


@pytest.mark.parametrize(("name", "role"), [("otto", "operator"), ("vera", "viewer")])
def test_only_the_owner_or_an_admin_pauses_or_resumes(name: str, role: str) -> None:
    campaign = nightly(user("olga"))
    api = api_for(user(name, role))
    for action in ("pause", "resume"):
        answer = api.post(f"/api/v1/campaigns/{campaign.pk}/{action}/")
        assert answer.status_code == 403
        assert answer.json()["detail"] == (
            "only the campaign's owner or an admin may pause or resume its schedule"
        )
    assert not Campaign.objects.get(pk=campaign.pk).schedule_paused


def test_anonymous_callers_are_refused() -> None:
    campaign = nightly()
    assert APIClient().post(f"/api/v1/campaigns/{campaign.pk}/pause/").status_code in (401, 403)


def test_every_campaign_carries_its_schedule_in_words_and_next_launch() -> None:
    nightly(schedule="30 6 * * 1")
    nightly(schedule="*/7 * * * *")
    nightly(schedule="")
    rows = api_for(user("vera", "viewer")).get("/api/v1/campaigns/").json()["results"]
    by_cron = {row["schedule"]: row for row in rows}
    assert by_cron["30 6 * * 1"]["schedule_words"] == "every Monday at 06:30 UTC"
    assert by_cron["*/7 * * * *"]["schedule_words"] == "*/7 * * * *"
    assert by_cron[""]["schedule_words"] == ""
    assert by_cron[""]["next_launch_at"] is None
    monday = datetime.fromisoformat(by_cron["30 6 * * 1"]["next_launch_at"])
    assert (monday.isoweekday(), monday.hour, monday.minute, monday.utcoffset()) == (
        1,
        6,
        30,
        timedelta(0),
    )
    assert timezone.now() < monday <= timezone.now() + timedelta(days=7)
    assert {row["schedule_paused"] for row in rows} == {False}


def test_a_viewer_reads_the_latest_launches_with_their_outcome() -> None:
    campaign = nightly()
    slot = datetime(2026, 3, 10, 2, tzinfo=UTC)
    refused = ScheduledLaunch.objects.create(
        campaign=campaign, slot=slot + timedelta(days=1), error="matrix: too many runs"
    )
    launched = ScheduledLaunch.objects.create(campaign=campaign, slot=slot, run_count=2)
    RunFactory(campaign=campaign, scheduled_launch=launched, status=Run.Status.SUCCEEDED)
    RunFactory(campaign=campaign, scheduled_launch=launched, status=Run.Status.FAILED)

    answer = api_for(user("vera", "viewer")).get(f"/api/v1/campaigns/{campaign.pk}/schedule/")
    assert answer.status_code == 200
    launches = answer.json()["launches"]
    assert [(row["slot"], row["run_count"], row["error"]) for row in launches] == [
        ("2026-03-11T02:00:00Z", 0, refused.error),
        ("2026-03-10T02:00:00Z", 2, ""),
    ]
    outcome = {key: launches[1][key] for key in ("succeeded", "failed", "cancelled", "active")}
    assert outcome == {"succeeded": 1, "failed": 1, "cancelled": 0, "active": 0}
    assert answer.json()["next_in"].startswith("in ")


def test_the_schema_documents_pause_resume_and_schedule(client: Client) -> None:
    client.force_login(user("vera", "viewer"))
    schema = client.get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    for action in ("pause", "resume"):
        post = paths[f"/api/v1/campaigns/{{id}}/{action}/"]["post"]
        assert set(post["responses"]) >= {"200", "403", "409"}
    assert "/api/v1/campaigns/{id}/schedule/" in paths
    campaign = schema["components"]["schemas"]["Campaign"]["properties"]
    assert {"schedule_words", "schedule_paused", "schedule_paused_at", "next_launch_at"} <= set(
        campaign
    )
    assert campaign["schedule_paused"]["readOnly"] is True
