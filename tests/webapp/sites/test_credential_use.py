"""Who may spend an endpoint's credential (issue 17, item 4): runs of its site's owner, of the
members of a team it is shared with, or of an admin; a campaign's runs are its owner's, whoever
launches them. Another operator's Test connection, campaign or launch is refused and spends
nothing; docs/roles.md states the rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    api_for,
    member,
    page_for,
    team,
    user,
)
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch
from webapp.campaigns.schedules import campaigns_launch_due
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db


def credentialed(owner_name: str) -> Endpoint:
    """An https endpoint with a bearer token, on a site of `owner_name`'s; nothing listens
    at its address (a test that gets through fails to connect, at once)."""
    site = SiteFactory(owner=user(owner_name))
    endpoint = EndpointFactory(
        site=site,
        protocol="https",
        base_url="https://127.0.0.1:1/",
        credential_kind="token",
        credential="opaque-t0ken-of-alice",
    )
    TestFileFactory(endpoint=endpoint, path="/store/f")
    return endpoint


def test_only_the_sites_owner_a_team_it_is_shared_with_or_an_admin_tests_its_connection() -> None:
    endpoint = credentialed("alice")
    alice = endpoint.site.owner
    bob, carol, root = user("bob"), member("carol", role="operator"), user("root", role="admin")
    endpoint.credential_teams.add(team("storage", manager=alice, members=[carol]))
    url = f"/endpoints/{endpoint.pk}/test/"

    assert not endpoint.credential_usable_by(None)  # nobody is nobody's: no default allow
    refused = page_for(bob).post(url)
    assert refused.status_code == 403
    assert "uses the credential of endpoint" in refused.content.decode()
    assert "only runs of its site&#x27;s owner (alice), members of storage or an admin" in (
        refused.content.decode()
    )
    for allowed in (alice, carol, root):
        answer = page_for(allowed).post(url, follow=True)
        assert answer.status_code == 200
        assert "Connection test: failed" in answer.content.decode()  # tried: nothing listens
    endpoint.credential_kind, endpoint.credential = "none", ""
    endpoint.save()
    assert page_for(bob).post(url, follow=True).status_code == 200  # nothing of alice's to spend


def test_a_campaign_of_another_operator_on_the_endpoint_is_refused_naming_endpoints() -> None:
    endpoint = credentialed("alice")
    bob, carol = user("bob"), member("carol", role="operator")
    body = {
        "name": "bobs",
        "endpoints": [endpoint.pk],
        "methods": ["direct"],
        "patterns": ["random"],
        "read_sizes": [4096],
        "fractions": [0.1],
        "clients": [1],
    }
    refused = api_for(bob).post("/api/v1/campaigns/", body, format="json")
    assert refused.status_code == 400
    assert "credential of endpoint" in refused.json()["endpoints"][0]
    assert not Campaign.objects.exists()
    page = page_for(bob).post(
        "/campaigns/new/",
        {**{k: ",".join(map(str, v)) for k, v in body.items() if k != "endpoints"}, "name": "p"}
        | {"endpoints": [endpoint.pk]},
    )
    assert "credential of endpoint" in page.content.decode()
    assert not Campaign.objects.exists()
    endpoint.credential_teams.add(team("storage", manager=endpoint.site.owner, members=[carol]))
    made = api_for(carol).post("/api/v1/campaigns/", {**body, "name": "carols"}, format="json")
    assert made.status_code == 201, made.json()


def test_a_launch_spends_the_campaign_owners_right_whoever_launches_it() -> None:
    endpoint = credentialed("alice")
    alice = endpoint.site.owner
    carol = member("carol", role="operator")
    storage = team("storage", manager=alice, members=[carol])
    endpoint.credential_teams.add(storage)
    carols = CampaignFactory(name="carols", endpoints=[endpoint], owner=carol, clients=[1])
    alices = CampaignFactory(name="alices", endpoints=[endpoint], owner=alice, clients=[1])
    storage.memberships.filter(user=carol).delete()  # carol left the team since

    refused = api_for(carol).post(f"/api/v1/campaigns/{carols.pk}/launch/")
    assert refused.status_code == 403
    assert "a campaign of carol uses the credential of endpoint" in refused.json()["detail"]
    ownerless = CampaignFactory(name="admins", endpoints=[endpoint], clients=[1])
    assert api_for(carol).post(f"/api/v1/campaigns/{ownerless.pk}/launch/").status_code < 300
    launched = api_for(carol).post(f"/api/v1/campaigns/{alices.pk}/launch/")
    assert launched.status_code in (200, 201, 202), (
        launched.json()
    )  # alice's campaign, alice's right
    assert set(Run.objects.values_list("campaign__name", flat=True)) == {"admins", "alices"}


def test_a_scheduled_launch_that_may_not_spend_the_credential_records_why_on_its_slot() -> None:
    endpoint = credentialed("alice")
    bobs = CampaignFactory(
        name="bobs", endpoints=[endpoint], owner=user("bob"), clients=[1], schedule="0 2 * * *"
    )
    Campaign.objects.filter(pk=bobs.pk).update(created_at=datetime(2026, 3, 9, tzinfo=UTC))
    (launch,) = campaigns_launch_due(now=datetime(2026, 3, 10, 2, 0, 30, tzinfo=UTC))
    assert (launch.campaign_id, launch.run_count) == (bobs.pk, 0)
    assert "uses the credential of endpoint" in launch.error
    assert not Run.objects.exists()
    assert ScheduledLaunch.objects.get().error == launch.error
