"""A second launch while runs of the campaign are still queued or running asks first: the
API answers 409 naming how many (unless ?again=1), the page asks "launch again?". Cancel of
a run that has already ended answers 409 naming its status, and the page says so."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import CampaignFactory, EndpointFactory, RunFactory, TestFileFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> User:
    made = User.objects.create_user("olga")
    user_set_role(user=made, role="operator")
    return made


@pytest.fixture
def api(operator: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(operator)
    return client


@pytest.fixture
def page(operator: User) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def campaign_of(owner: User, runs: int = 3) -> Campaign:
    endpoint = EndpointFactory()
    TestFileFactory(endpoint=endpoint, is_default=True)
    return CampaignFactory(owner=owner, endpoints=[endpoint], clients=list(range(1, runs + 1)))


def end_all(campaign: Campaign) -> None:
    campaign.runs.update(status=Run.Status.SUCCEEDED)


# -- the API ----------------------------------------------------------------------------------


def test_a_second_api_launch_while_runs_are_queued_answers_409_naming_how_many(
    api: APIClient, operator: User
) -> None:
    campaign = campaign_of(operator)
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/launch/").status_code == 201
    answer = api.post(f"/api/v1/campaigns/{campaign.pk}/launch/")
    assert answer.status_code == 409
    assert answer.json()["active"] == 3
    assert "3 runs of this campaign are still queued or running" in answer.json()["detail"]
    assert "?again=1" in answer.json()["detail"]
    assert campaign.runs.count() == 3


def test_again_1_launches_while_runs_are_queued(api: APIClient, operator: User) -> None:
    campaign = campaign_of(operator)
    api.post(f"/api/v1/campaigns/{campaign.pk}/launch/")
    answer = api.post(f"/api/v1/campaigns/{campaign.pk}/launch/?again=1")
    assert answer.status_code == 201
    assert len(answer.json()["runs"]) == 3
    assert campaign.runs.count() == 6


def test_a_launch_after_every_run_ended_needs_no_again(api: APIClient, operator: User) -> None:
    campaign = campaign_of(operator)
    api.post(f"/api/v1/campaigns/{campaign.pk}/launch/")
    end_all(campaign)
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/launch/").status_code == 201
    assert campaign.runs.count() == 6


def test_one_run_still_queued_is_named_in_the_singular(api: APIClient, operator: User) -> None:
    campaign = campaign_of(operator, runs=1)
    api.post(f"/api/v1/campaigns/{campaign.pk}/launch/")
    detail = api.post(f"/api/v1/campaigns/{campaign.pk}/launch/").json()["detail"]
    assert detail.startswith("1 run of this campaign is still queued or running")


def test_the_schedule_launches_whatever_is_still_queued(operator: User) -> None:
    campaign = campaign_of(operator)
    campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    campaign_launch(campaign=campaign, trigger=Run.Trigger.SCHEDULE)
    assert campaign.runs.count() == 6


def test_the_runs_of_one_launch_share_its_instant(operator: User) -> None:
    campaign = campaign_of(operator, runs=5)
    runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    stored = set(campaign.runs.values_list("created_at", flat=True))
    assert stored == {runs[0].created_at}


# -- the pages --------------------------------------------------------------------------------


def test_the_campaign_page_says_launch_1_run_in_the_singular(page: Client, operator: User) -> None:
    campaign = campaign_of(operator, runs=1)
    html = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert ">Launch 1 run</button>" in html


def test_the_campaign_page_shows_what_is_still_queued_and_its_launch_asks_first(
    page: Client, operator: User
) -> None:
    campaign = campaign_of(operator)
    page.post(f"/campaigns/{campaign.pk}/launch/")
    html = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "3 runs of this campaign are still queued or running" in html
    assert "Launch 3 runs again…</button>" in html
    assert "0 of 3 runs launched since" in html
    assert '<strong class="eta">unknown: no earlier runs to go by</strong>' in html

    asked = page.post(f"/campaigns/{campaign.pk}/launch/")
    assert asked.status_code == 200
    text = asked.content.decode()
    assert "3 runs of this campaign are still queued or running: launch 3 runs again?" in text
    assert 'name="again" value="1"' in text
    assert campaign.runs.count() == 3

    launched = page.post(f"/campaigns/{campaign.pk}/launch/", {"again": "1"}, follow=True)
    assert "3 runs queued for" in launched.content.decode()
    assert campaign.runs.count() == 6


def test_a_page_launch_after_every_run_ended_launches_at_once(page: Client, operator: User) -> None:
    campaign = campaign_of(operator, runs=1)
    page.post(f"/campaigns/{campaign.pk}/launch/")
    end_all(campaign)
    html = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert ">Launch 1 run</button>" in html
    launched = page.post(f"/campaigns/{campaign.pk}/launch/", follow=True)
    assert "1 run queued for" in launched.content.decode()
    assert campaign.runs.count() == 2


# -- cancel of a run that has ended -----------------------------------------------------------


@pytest.mark.parametrize("status", [Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED])
def test_cancel_of_an_ended_run_answers_409_naming_its_status(
    api: APIClient, operator: User, status: str
) -> None:
    run = RunFactory(campaign=campaign_of(operator), status=status)
    answer = api.post(f"/api/v1/runs/{run.pk}/cancel/")
    assert answer.status_code == 409
    assert answer.json() == {
        "detail": f"run {run.pk} has already ended ({status}): there is nothing to cancel",
        "status": status,
    }
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == (status, False)


def test_cancel_of_an_ended_run_on_its_page_says_it_was_not_cancelled(
    page: Client, operator: User
) -> None:
    run = RunFactory(campaign=campaign_of(operator), status=Run.Status.SUCCEEDED)
    response = page.post(f"/runs/{run.pk}/cancel/", follow=True)
    assert (
        f"Not cancelled: run {run.pk} has already ended (succeeded): there is nothing to cancel."
        in response.content.decode()
    )
