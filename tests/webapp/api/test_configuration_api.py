"""Configuration as code over the API: a campaign's export and the import, with the
permissions of creating and editing campaigns, sites and endpoints."""

from __future__ import annotations

import pytest

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    api_for,
    user,
)
from webapp.campaigns.configuration.export import configuration_export
from webapp.campaigns.models import Campaign
from webapp.sites.models import Endpoint, Site

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

YAML = "application/yaml"


@pytest.fixture
def campaign() -> Campaign:
    admin_site = SiteFactory(name="ADMINS-SITE")  # no owner: an admin's
    endpoint = EndpointFactory(site=admin_site, name="admins-root")
    TestFileFactory(endpoint=endpoint, path="/data/f")
    return CampaignFactory(name="nightly", endpoints=[endpoint])


def test_an_operator_exports_a_campaign_and_imports_it_as_their_own(campaign: Campaign) -> None:
    operator = user("olga")
    api = api_for(operator)
    exported = api.get(f"/api/v1/campaigns/{campaign.pk}/export/")
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith(YAML)
    text = exported.content.decode()
    assert text == configuration_export(campaigns=[campaign])
    copy = text.replace("name: nightly", "name: nightly-copy")
    dry = api.post("/api/v1/campaigns/import/?dry_run=1", copy, content_type=YAML)
    assert dry.status_code == 200, dry.json()
    assert (dry.json()["applied"], dry.json()["counts"]["create"]) == (False, 1)
    assert not Campaign.objects.filter(name="nightly-copy").exists()
    done = api.post("/api/v1/campaigns/import/", copy, content_type=YAML)
    assert done.status_code == 200, done.json()
    assert done.json()["applied"] is True
    assert {(s["kind"], s["action"]) for s in done.json()["plan"]} == {
        ("vantage point", "unchanged"),
        ("site", "unchanged"),
        ("endpoint", "unchanged"),
        ("test file", "unchanged"),
        ("campaign", "create"),
    }
    assert Campaign.objects.get(name="nightly-copy").owner == operator


def test_a_viewer_exports_but_may_not_import(campaign: Campaign) -> None:
    api = api_for(user("vera", role="viewer"))
    text = api.get(f"/api/v1/campaigns/{campaign.pk}/export/").content.decode()
    refused = api.post("/api/v1/campaigns/import/", text, content_type=YAML)
    assert refused.status_code == 403
    assert Campaign.objects.count() == 1


def test_an_operator_may_not_change_an_admins_site_and_nothing_changes(campaign: Campaign) -> None:
    api = api_for(user("olga"))
    text = configuration_export(campaigns=[campaign])
    changed = text.replace("root://127.0.0.1:1094/", "root://127.0.0.2:1094/").replace(
        "name: nightly", "name: other"
    )
    refused = api.post("/api/v1/campaigns/import/", changed, content_type=YAML)
    assert refused.status_code == 403
    [error] = refused.json()["errors"]
    assert error["forbidden"] is True
    assert error["path"] == "sites[0].endpoints[0]"
    assert error["text"].startswith(f"import.yaml:{error['line']}: sites[0].endpoints[0]: ")
    assert "only the owner of site ADMINS-SITE" in error["message"]
    assert Endpoint.objects.get().base_url == "root://127.0.0.1:1094/"
    assert not Campaign.objects.filter(name="other").exists()


def test_an_invalid_file_answers_400_with_every_error_and_creates_nothing() -> None:
    api = api_for(user("olga"))
    text = "version: 1\nsites:\n- name: NEW\n  tier: [T2]\n- name: NEW\n"
    answer = api.post("/api/v1/campaigns/import/", text, content_type=YAML)
    assert answer.status_code == 400
    assert [e["text"] for e in answer.json()["errors"]] == [
        "import.yaml:4: sites[0].tier: must be a text",
        "import.yaml:5: sites[1]: site NEW is also at line 3: objects are matched by name",
    ]
    assert not Site.objects.exists()


def test_an_import_without_a_yaml_body_is_415_naming_the_type() -> None:
    answer = api_for(user("olga")).post("/api/v1/campaigns/import/")
    assert answer.status_code == 415
    assert "application/yaml" in answer.json()["detail"]
