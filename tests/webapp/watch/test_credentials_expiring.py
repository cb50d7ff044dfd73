"""Credentials that will fail a scheduled campaign's runs: the selector of
webapp/watch/credentials.py (tokens and proxies expiring within
FEDPROBE_CREDENTIAL_WARN_DAYS or expired, oauth clients whose issuer refused on the latest
run; only enabled endpoints of scheduled, unpaused campaigns), and the campaign preview's
warning on the campaign page, the form's preview and the API."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    TestFileFactory,
    VantagePointFactory,
    api_for,
    jwt,
    oauth_client,
    page_for,
    proxy_pem,
    user,
)
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint
from webapp.watch.credentials import credentials_expiring

pytestmark = pytest.mark.django_db

# The proxies are made against the real clock: so is this test's "now".
NOW = datetime.now(UTC).replace(second=0, microsecond=0)


def token_expiring(at: datetime) -> str:
    return jwt(
        iss="https://iam.example.org/", sub="robot", scope="storage.read:/", exp=int(at.timestamp())
    )


def endpoint(name: str, kind: str, credential: str, **fields: Any) -> Endpoint:
    made = EndpointFactory(
        name=name,
        credential_kind=kind,
        credential=credential,
        base_url="https://127.0.0.1:8443/",
        protocol="https",
        **fields,
    )
    TestFileFactory(endpoint=made)
    return made


def scheduled(name: str, endpoints: list[Endpoint], **fields: Any) -> Campaign:
    return CampaignFactory(name=name, endpoints=endpoints, schedule="0 2 * * *", **fields)


@pytest.fixture
def world() -> dict[str, Endpoint]:
    made = {
        "soon": endpoint("soon", "token", token_expiring(NOW + timedelta(days=3))),
        "later": endpoint("later", "token", token_expiring(NOW + timedelta(days=30))),
        "expired": endpoint("expired", "x509-proxy", proxy_pem(lifetime=timedelta(minutes=-30))),
        "disabled": endpoint(
            "disabled", "token", token_expiring(NOW + timedelta(days=1)), enabled=False
        ),
        "paused": endpoint("paused", "token", token_expiring(NOW + timedelta(days=1))),
        "by-hand": endpoint("by-hand", "token", token_expiring(NOW + timedelta(days=1))),
        "refused": endpoint("refused", "oauth-client", json.dumps(oauth_client())),
        "recovered": endpoint("recovered", "oauth-client", json.dumps(oauth_client())),
    }
    nightly = scheduled(
        "nightly",
        [made[n] for n in ("soon", "later", "expired", "disabled", "refused", "recovered")],
    )
    scheduled("paused-nightly", [made["paused"]], schedule_paused_at=NOW)
    CampaignFactory(name="by-hand", endpoints=[made["by-hand"]])
    vp = VantagePointFactory()
    credential_error = [
        {
            "class": "auth",
            "message": "token request to https://iam: 401: invalid_client",
            "client": None,
            "phase": "credential",
        }
    ]
    for name, outcomes in (
        ("refused", ["succeeded", "failed"]),
        ("recovered", ["failed", "succeeded"]),
    ):
        for hour, status in enumerate(outcomes):
            run = Run.objects.create(
                campaign=nightly,
                endpoint=made[name],
                test_file=made[name].files.get(),
                vantage_point=vp,
                status=status,
                method="direct",
                pattern="random",
                read_size=65536,
                fraction=0.1,
                clients=1,
                errors=credential_error if status == "failed" else [],
            )
            Run.objects.filter(pk=run.pk).update(created_at=NOW - timedelta(hours=5 - hour))
    return made


def test_lists_the_failing_credentials_of_scheduled_campaigns_only(
    world: dict[str, Endpoint],
) -> None:
    found = credentials_expiring(now=NOW)
    assert [f.expiry.endpoint_name for f in found] == ["refused", "expired", "soon"]
    by_name = {f.expiry.endpoint_name: f for f in found}
    stamp = (NOW + timedelta(days=3)).strftime("%Y-%m-%d %H:%M UTC")
    assert by_name["soon"].expiry.message == (
        f"the token of endpoint soon expires in 3 days ({stamp}): its runs will fail from then"
    )
    assert by_name["soon"].campaigns == ("nightly",)
    assert by_name["expired"].expiry.expired
    assert by_name["expired"].expiry.message.startswith("the X.509 proxy of endpoint expired")
    assert "its latest run got no token" in by_name["refused"].expiry.message
    assert "invalid_client" in by_name["refused"].expiry.message


def test_the_warning_window_is_the_setting(world: dict[str, Endpoint]) -> None:
    with override_settings(FEDPROBE_CREDENTIAL_WARN_DAYS=2):
        names = [f.expiry.endpoint_name for f in credentials_expiring(now=NOW)]
    assert "soon" not in names and "expired" in names
    with override_settings(FEDPROBE_CREDENTIAL_WARN_DAYS=31):
        names = [f.expiry.endpoint_name for f in credentials_expiring(now=NOW)]
    assert "later" in names


def test_the_campaign_preview_warns_on_its_page_form_and_api() -> None:
    soon = timezone.now() + timedelta(days=3, minutes=30)
    made = endpoint("soon-ep", "token", token_expiring(soon))
    owner = user("owner", "operator")
    campaign = scheduled("warned", [made], owner=owner)
    stamp = soon.strftime("%Y-%m-%d %H:%M UTC")
    sentence = f"the token of endpoint soon-ep expires in 3 days ({stamp})"
    page = page_for(owner)
    assert sentence in page.get(f"/campaigns/{campaign.pk}/").content.decode()
    api = api_for(owner).get(f"/api/v1/campaigns/{campaign.pk}/").json()
    assert [w.split(": its runs")[0] for w in api["credential_warnings"]] == [sentence]
    plain = CampaignFactory(name="plain", endpoints=[EndpointFactory(name="no-credential")])
    assert api_for(owner).get(f"/api/v1/campaigns/{plain.pk}/").json()["credential_warnings"] == []


def test_home_lists_the_expiring_credentials(world: dict[str, Endpoint]) -> None:
    html = page_for(user("viewer", "viewer")).get("/").content.decode()
    listed = html.split('id="expiring-credentials"')[1].split("</ul>")[0]
    assert "the token of endpoint soon expires in" in listed
    assert "the X.509 proxy of endpoint expired expired" in listed
    assert "endpoint later" not in listed and "endpoint paused" not in listed
