"""Cancelling a whole campaign (issue 10, item 16): queued runs end cancelled at once,
running ones are asked to stop (their workers end them; tests/webapp/api/test_api_cancel.py
shows a real worker doing so), through the API and the page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import CampaignFactory, EndpointFactory, TestFileFactory
from webapp.accounts.services import api_token_create, user_set_role
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch, run_claim

pytestmark = pytest.mark.django_db


def launched(runs: int = 3) -> tuple[Campaign, list[Run]]:
    endpoint = EndpointFactory()
    TestFileFactory(endpoint=endpoint, is_default=True)
    campaign = CampaignFactory(
        endpoints=[endpoint],
        methods=["direct"],
        read_sizes=[4096],
        clients=list(range(1, runs + 1)),
    )
    return campaign, campaign_launch(campaign=campaign, trigger=Run.Trigger.API)


def operator(kind: str) -> APIClient | Client:
    user = User.objects.create_user(f"cancel-{kind}")
    user_set_role(user=user, role="operator")
    if kind == "api":
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
        return api
    page = Client()
    page.force_login(user)
    return page


def test_the_api_cancels_queued_runs_and_stops_running_ones_then_says_409() -> None:
    campaign, runs = launched()
    running = run_claim(run_id=runs[0].pk, worker="w@host")
    assert running is not None
    other_campaign, others = launched(1)
    api = operator("api")
    Campaign.objects.filter(pk=campaign.pk).update(owner=User.objects.get(username="cancel-api"))
    answer = api.post(f"/api/v1/campaigns/{campaign.pk}/cancel/")
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"cancelled": [r.pk for r in runs[1:]], "stopping": [runs[0].pk]}
    statuses = dict(Run.objects.filter(campaign=campaign).values_list("pk", "status"))
    assert statuses == {runs[0].pk: "running", runs[1].pk: "cancelled", runs[2].pk: "cancelled"}
    assert Run.objects.get(pk=runs[0].pk).cancel_requested
    assert Run.objects.get(pk=others[0].pk).status == "queued"  # another campaign's run
    Run.objects.filter(pk=runs[0].pk).update(status="cancelled")
    again = api.post(f"/api/v1/campaigns/{campaign.pk}/cancel/")
    assert again.status_code == 409
    assert other_campaign.runs.count() == 1


def test_the_page_cancels_and_says_how_many() -> None:
    campaign, _ = launched()
    page = operator("page")
    Campaign.objects.filter(pk=campaign.pk).update(owner=User.objects.get(username="cancel-page"))
    detail = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "Cancel 3 queued or running runs" in detail
    answer = page.post(f"/campaigns/{campaign.pk}/cancel/", follow=True)
    assert "3 queued runs cancelled, 0 running runs asked to stop." in answer.content.decode()
    assert set(Run.objects.filter(campaign=campaign).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert "queued or running runs</button>" not in answer.content.decode()


def test_a_viewer_cannot_cancel_a_campaign() -> None:
    campaign, _ = launched(1)
    viewer = User.objects.create_user("cancel-viewer")
    user_set_role(user=viewer, role="viewer")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=viewer)}")
    assert api.post(f"/api/v1/campaigns/{campaign.pk}/cancel/").status_code == 403
    assert Run.objects.get(campaign=campaign).status == "queued"
