"""Who may cancel (issue 10, item 11): a run, its campaign's owner, whoever launched it, or
an admin; a campaign, its owner or an admin (an operator who launched some of its runs:
those runs). Through the API and the pages alike; the buttons show only to them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    TestFileFactory,
    api_for,
    page_for,
    user,
)
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch

pytestmark = pytest.mark.django_db

CAMPAIGN_BUTTON = "queued or running runs</button>"
RUN_BUTTON = 'class="danger">Cancel</button>'


def campaign_of(owner: User | None, runs: int = 2) -> Campaign:
    endpoint = EndpointFactory()
    TestFileFactory(endpoint=endpoint, is_default=True)
    return CampaignFactory(owner=owner, endpoints=[endpoint], clients=list(range(1, runs + 1)))


def launch(campaign: Campaign, by: User | None) -> list[Run]:
    return campaign_launch(campaign=campaign, trigger=Run.Trigger.API, user=by)


def statuses(campaign: Campaign) -> list[str]:
    return list(campaign.runs.order_by("pk").values_list("status", flat=True))


def test_launching_records_who_launched_and_the_schedule_records_nobody() -> None:
    alice = user("alice")
    campaign = campaign_of(alice, runs=1)
    (by_hand,) = launch(campaign, alice)
    (scheduled,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.SCHEDULE)
    assert (by_hand.launched_by, scheduled.launched_by) == (alice, None)
    launched = api_for(user("bob")).post(f"/api/v1/campaigns/{campaign.pk}/launch/?again=1")
    launched = launched.json()
    assert Run.objects.get(pk=launched["runs"][0]).launched_by.username == "bob"


def test_another_operator_cannot_cancel_a_run_through_the_api_or_the_page() -> None:
    alice, bob = user("alice"), user("bob")
    campaign = campaign_of(alice)
    first, second = launch(campaign, alice)
    answer = api_for(bob).post(f"/api/v1/runs/{first.pk}/cancel/")
    assert answer.status_code == 403
    assert "campaign's owner, whoever launched the run, or an admin" in answer.json()["detail"]
    page = page_for(bob)
    assert page.post(f"/runs/{second.pk}/cancel/").status_code == 403
    assert RUN_BUTTON not in page.get(f"/runs/{second.pk}/").content.decode()
    assert statuses(campaign) == ["queued", "queued"]


def test_the_campaign_owner_the_launcher_and_an_admin_cancel_a_run() -> None:
    alice, bob, admin = user("alice"), user("bob"), user("root", "admin")
    campaign = campaign_of(alice, runs=3)
    bobs_runs = launch(campaign, bob)  # any operator may launch anyone's campaign
    by_owner, by_launcher, by_admin = bobs_runs
    assert RUN_BUTTON in page_for(alice).get(f"/runs/{by_owner.pk}/").content.decode()
    assert api_for(alice).post(f"/api/v1/runs/{by_owner.pk}/cancel/").status_code == 202
    assert RUN_BUTTON in page_for(bob).get(f"/runs/{by_launcher.pk}/").content.decode()
    assert page_for(bob).post(f"/runs/{by_launcher.pk}/cancel/").status_code == 302
    assert api_for(admin).post(f"/api/v1/runs/{by_admin.pk}/cancel/").status_code == 202
    assert statuses(campaign) == ["cancelled"] * 3


def test_a_scheduled_run_of_a_campaign_without_owner_is_an_admins_to_cancel() -> None:
    campaign = campaign_of(None, runs=1)
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.SCHEDULE)
    assert api_for(user("bob")).post(f"/api/v1/runs/{run.pk}/cancel/").status_code == 403
    assert page_for(user("root", "admin")).post(f"/runs/{run.pk}/cancel/").status_code == 302
    assert statuses(campaign) == ["cancelled"]


def test_another_operator_cannot_cancel_a_campaign_through_the_api_or_the_page() -> None:
    alice, bob = user("alice"), user("bob")
    campaign = campaign_of(alice)
    launch(campaign, alice)
    answer = api_for(bob).post(f"/api/v1/campaigns/{campaign.pk}/cancel/")
    assert answer.status_code == 403
    assert "only the campaign's owner or an admin" in answer.json()["detail"]
    page = page_for(bob)
    assert page.post(f"/campaigns/{campaign.pk}/cancel/").status_code == 403
    detail = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert CAMPAIGN_BUTTON not in detail
    assert "Launch 2 runs" in detail  # launching stays open to any operator
    assert statuses(campaign) == ["queued", "queued"]


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_the_owner_and_an_admin_cancel_every_run_of_a_campaign(who: str) -> None:
    alice, bob = user("alice"), user("bob")
    campaign = campaign_of(alice)
    launch(campaign, alice)
    launch(campaign, bob)
    canceller = alice if who == "owner" else user("root", "admin")
    detail = page_for(canceller).get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f"Yes, cancel 4 {CAMPAIGN_BUTTON}" in detail
    answer = api_for(canceller).post(f"/api/v1/campaigns/{campaign.pk}/cancel/")
    assert answer.status_code == 202
    assert len(answer.json()["cancelled"]) == 4
    assert statuses(campaign) == ["cancelled"] * 4


def test_an_operator_who_launched_runs_of_a_campaign_cancels_only_those() -> None:
    alice, bob = user("alice"), user("bob")
    campaign = campaign_of(alice)
    alices = launch(campaign, alice)
    bobs = launch(campaign, bob)
    page = page_for(bob)
    assert (
        f"Yes, cancel 2 {CAMPAIGN_BUTTON}"
        in page.get(f"/campaigns/{campaign.pk}/").content.decode()
    )
    answer = page.post(f"/campaigns/{campaign.pk}/cancel/", follow=True)
    assert "2 queued runs cancelled" in answer.content.decode()
    assert {r.pk: r.status for r in campaign.runs.all()} == {
        **{run.pk: "queued" for run in alices},
        **{run.pk: "cancelled" for run in bobs},
    }
    again = api_for(bob).post(f"/api/v1/campaigns/{campaign.pk}/cancel/")
    assert again.status_code == 409  # none of theirs left: alice's stay queued
