"""The schedule on the pages: Pause and Resume on the campaign page for its owner or an admin
(403 with the reason for anyone else), the next launch and the latest launches with their
outcome, the cron in words on the campaign page, the campaign list and the form's help."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.contrib.auth.models import User

from tests.webapp.factories import CampaignFactory, RunFactory, page_for, user
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch

pytestmark = pytest.mark.django_db

PAUSE = "Pause schedule</button>"
RESUME = "Resume schedule</button>"


def text(html: bytes) -> str:
    """The page's text, tags dropped and spaces collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html.decode())).split())


def nightly(owner: User | None, schedule: str = "0 2 * * *") -> Campaign:
    return CampaignFactory(name="nightly", schedule=schedule, owner=owner)


def test_the_owner_pauses_and_resumes_from_the_campaign_page() -> None:
    olga = user("olga")
    campaign = nightly(olga)
    page = page_for(olga)
    shown = page.get(f"/campaigns/{campaign.pk}/")
    assert PAUSE in shown.content.decode() and RESUME not in shown.content.decode()
    assert re.search(
        r"Next launch: \d{4}-\d\d-\d\d 02:00 UTC \(in \d+ (h|min|s)\)", text(shown.content)
    )

    paused = page.post(f"/campaigns/{campaign.pk}/pause/", follow=True)
    assert paused.redirect_chain == [(f"/campaigns/{campaign.pk}/", 302)]
    words = text(paused.content)
    assert "Schedule of 'nightly' paused: it launches nothing until resumed." in words
    assert "Paused since" in words and "resuming starts from its next slot" in words
    assert "Next launch" not in words
    assert RESUME in paused.content.decode() and PAUSE not in paused.content.decode()
    campaign.refresh_from_db()
    assert (campaign.schedule, campaign.schedule_paused) == ("0 2 * * *", True)

    resumed = page.post(f"/campaigns/{campaign.pk}/resume/", follow=True)
    words = text(resumed.content)
    assert re.search(r"Schedule of 'nightly' resumed: next launch \S+ 02:00 UTC\.", words)
    assert PAUSE in resumed.content.decode()
    assert not Campaign.objects.get(pk=campaign.pk).schedule_paused


def test_an_admin_pauses_anyones_schedule_and_a_second_pause_says_it_is_paused() -> None:
    campaign = nightly(user("olga"))
    page = page_for(user("ada", "admin"))
    assert PAUSE in page.get(f"/campaigns/{campaign.pk}/").content.decode()
    page.post(f"/campaigns/{campaign.pk}/pause/")
    again = page.post(f"/campaigns/{campaign.pk}/pause/", follow=True)
    assert "'nightly' is already paused (since " in text(again.content)


@pytest.mark.parametrize(("name", "role"), [("otto", "operator"), ("vera", "viewer")])
def test_others_see_no_button_and_are_refused_with_the_reason(name: str, role: str) -> None:
    campaign = nightly(user("olga"))
    page = page_for(user(name, role))
    shown = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert PAUSE not in shown and RESUME not in shown
    refused = page.post(f"/campaigns/{campaign.pk}/pause/")
    assert refused.status_code == 403
    if role == "operator":
        assert "nly the campaign&#x27;s owner or an admin may pause or resume its schedule" in (
            refused.content.decode()
        )
    assert not Campaign.objects.get(pk=campaign.pk).schedule_paused


def test_a_campaign_launched_by_hand_shows_no_schedule_section() -> None:
    olga = user("olga")
    campaign = nightly(olga, schedule="")
    shown = page_for(olga).get(f"/campaigns/{campaign.pk}/").content.decode()
    assert PAUSE not in shown and 'id="schedule-title"' not in shown
    assert "launched by hand" in shown


def test_the_page_lists_the_latest_launches_with_their_outcome_or_error() -> None:
    olga = user("olga")
    campaign = nightly(olga)
    slot = datetime(2026, 3, 10, 2, tzinfo=UTC)
    launched = ScheduledLaunch.objects.create(
        campaign=campaign, slot=slot, launched_at=slot + timedelta(seconds=20), run_count=4
    )
    for status in ("succeeded", "succeeded", "failed", "queued"):
        RunFactory(campaign=campaign, scheduled_launch=launched, status=status)
    ScheduledLaunch.objects.create(
        campaign=campaign,
        slot=slot + timedelta(days=1),
        launched_at=slot + timedelta(days=1, seconds=5),
        error="matrix: 5 runs exceed the limit of 2 per launch: use fewer values",
    )
    words = text(page_for(olga).get(f"/campaigns/{campaign.pk}/").content)
    assert (
        "2026-03-11 02:00 2026-03-11 02:00:05 0 not launched matrix: 5 runs exceed the limit "
        "of 2 per launch: use fewer values" in words
    )
    assert (
        "2026-03-10 02:00 2026-03-10 02:00:20 4 2 succeeded 1 failed 1 queued or running" in words
    )
    assert Run.objects.filter(scheduled_launch=launched).count() == 4


def test_the_cron_is_in_words_on_the_campaign_page_and_list() -> None:
    vera = user("vera", "viewer")
    monday = nightly(None, schedule="30 6 * * 1")
    odd = CampaignFactory(name="odd", schedule="*/7 * * * *")
    page = page_for(vera)
    assert "30 6 * * 1 (UTC): every Monday at 06:30 UTC" in text(
        page.get(f"/campaigns/{monday.pk}/").content
    )
    assert "*/7 * * * * (UTC) Created" in text(page.get(f"/campaigns/{odd.pk}/").content)
    page_for(user("ada", "admin")).post(f"/campaigns/{monday.pk}/pause/")
    listed = text(page.get("/campaigns/").content)
    assert "30 6 * * 1 every Monday at 06:30 UTC paused" in listed
    assert "*/7 * * * * " in listed and "*/7 * * * * every" not in listed


def test_the_forms_help_gives_examples_in_words_and_reads_the_schedule_given() -> None:
    olga = user("olga")
    campaign = nightly(olga, schedule="0 2 1 * *")
    page = page_for(olga)
    new = text(page.get("/campaigns/new/").content)
    assert "0 2 * * * : every day at 02:00 UTC; 30 6 * * 1 : every Monday at 06:30 UTC" in new
    assert "This one:" not in new
    edit = text(page.get(f"/campaigns/{campaign.pk}/edit/").content)
    assert "This one: at 02:00 UTC on the 1st of every month." in edit
