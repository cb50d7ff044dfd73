"""Credentials expiring as alerts: the watch's pass keeps one tester-fault regression per
endpoint whose credential fails (or will fail) a scheduled campaign's runs, opened before the
runs fail, blamed on the credential and kept out of the site's figures, changed by nothing on
the next pass, and resolved when the credential is replaced, no longer failing, or no
scheduled campaign measures the endpoint."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
    jwt,
    oauth_client,
    page_for,
    user,
)
from tests.webapp.watch.nights import Series, run
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint
from webapp.watch.actions import regression_resolve
from webapp.watch.credentials import credential_key
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression
from webapp.watch.selectors import regression_list, regression_needing_attention

pytestmark = pytest.mark.django_db
State = Regression.State

NOW = datetime(2026, 11, 20, 6, 0, tzinfo=UTC)


def token_expiring(at: datetime) -> str:
    return jwt(
        iss="https://iam.example.org/", sub="robot", scope="storage.read:/", exp=int(at.timestamp())
    )


def endpoint(kind: str = "token", credential: str = "", **fields: Any) -> Endpoint:
    made = EndpointFactory(
        name="door",
        site=SiteFactory(name="T2_XX"),
        credential_kind=kind,
        credential=credential or token_expiring(NOW + timedelta(days=3)),
        base_url="https://127.0.0.1:8443/",
        protocol="https",
        **fields,
    )
    TestFileFactory(endpoint=made)
    return made


def nightly(target: Endpoint, **fields: Any) -> Campaign:
    fields.setdefault("schedule", "0 2 * * *")
    return CampaignFactory(name="nightly", endpoints=[target], **fields)


def replace_credential(target: Endpoint, credential: str) -> None:
    target.credential = credential
    target.save(update_fields=["credential"])


def measured(
    target: Endpoint, campaign: Campaign, errors: list[dict[str, Any]] | None = None, **fields: Any
) -> Run:
    """A run of last night, ended at 02:01."""
    point = VantagePointFactory(name="local")
    of = Series(target, point, campaign, target.files.get())
    made = run(of, NOW.date() - timedelta(days=1), **fields)
    if errors:
        Run.objects.filter(pk=made.pk).update(errors=errors)
    return made


def pass_at(moment: datetime) -> Regression | None:
    watch_evaluate(now=moment)
    return Regression.objects.filter(key__endswith=":credential").order_by("-id").first()


def test_an_expiring_token_opens_one_alert_before_the_runs_fail_kept_off_the_site() -> None:
    door = endpoint()
    measured(door, nightly(door), throughput_mbps=10.0)
    regression = pass_at(NOW)

    assert regression is not None and regression.key == credential_key(door.pk)
    assert (regression.state, regression.severity) == (State.TESTER_FAULT, "warning")
    assert regression.summary == (
        "the token of endpoint door (site T2_XX) expires at 2026-11-23 06:00 UTC: the runs of "
        "nightly will fail from then; replace it before"
    )
    assert (regression.endpoint_id, regression.site_id) == (door.pk, door.site_id)
    assert regression.blame["target"] == "credential"
    assert regression.blame["expires_at"] == "2026-11-23T06:00:00+00:00"
    # The runs still succeed: nothing against the site's series, nothing needing its attention.
    assert list(Regression.objects.values_list("key", flat=True)) == [regression.key]
    assert regression_needing_attention(limit=10) == ([], 0)
    assert [r.pk for r in regression_list(filters={"blame": "credential"})] == [regression.pk]
    assert not regression_list(filters={"blame": "site"}).exists()
    viewer = page_for(user("viewer", "viewer"))
    listed = viewer.get("/regressions/?blame=credential")
    assert f'href="/regressions/{regression.pk}/"' in listed.content.decode()
    detail = viewer.get(f"/regressions/{regression.pk}/")
    assert "a credential (token of endpoint door)" in detail.content.decode()

    assert pass_at(NOW) == regression  # the same pass again
    again = pass_at(NOW + timedelta(hours=1))
    assert again is not None
    assert (again.summary, again.severity) == (regression.summary, regression.severity)
    assert list(again.events.values_list("state", flat=True)) == ["tester-fault"]


def test_once_expired_the_same_alert_says_so_and_is_critical_without_a_new_event() -> None:
    door = endpoint()
    nightly(door)
    opened = pass_at(NOW)
    expired = pass_at(NOW + timedelta(days=4))
    assert expired is not None and opened is not None and expired.pk == opened.pk
    assert expired.severity == "critical"
    assert "expired at 2026-11-23 06:00 UTC: the runs of nightly fail" in expired.summary
    assert expired.events.count() == 1


def test_replacing_the_credential_resolves_the_alert() -> None:
    door = endpoint()
    nightly(door)
    first = pass_at(NOW)
    assert first is not None

    # Replaced by one that expires soon too: the first alert is over, the new one's opens.
    replace_credential(door, token_expiring(NOW + timedelta(days=5)))
    second = pass_at(NOW + timedelta(hours=1))
    first.refresh_from_db()
    assert first.state == State.RESOLVED
    assert first.events.get(state="resolved").note == (
        "the credential of endpoint door was replaced"
    )
    assert second is not None and second.pk != first.pk
    assert second.state == State.TESTER_FAULT
    assert "expires at 2026-11-25 06:00 UTC" in second.summary

    replace_credential(door, token_expiring(NOW + timedelta(days=90)))
    assert pass_at(NOW + timedelta(hours=2)) == second
    second.refresh_from_db()
    assert second.state == State.RESOLVED
    assert second.events.get(state="resolved").note == (
        "the credential of endpoint door was replaced: it expires at 2027-02-18 06:00 UTC"
    )
    pass_at(NOW + timedelta(hours=3))
    assert not Regression.objects.filter(state__in=Regression.LIVE).exists()


def test_an_unscheduled_campaign_raises_nothing_and_unscheduling_resolves() -> None:
    by_hand = endpoint()
    CampaignFactory(name="by-hand", endpoints=[by_hand])
    assert pass_at(NOW) is None

    campaign = nightly(by_hand)
    regression = pass_at(NOW + timedelta(hours=1))
    assert regression is not None and regression.state == State.TESTER_FAULT
    Campaign.objects.filter(pk=campaign.pk).update(schedule_paused_at=NOW)
    pass_at(NOW + timedelta(hours=2))
    regression.refresh_from_db()
    assert regression.state == State.RESOLVED
    assert regression.events.get(state="resolved").note == (
        "no scheduled campaign measures endpoint door any more"
    )


def test_an_oauth_client_its_issuer_refused_is_a_critical_alert() -> None:
    door = endpoint(kind="oauth-client", credential=json.dumps(oauth_client()))
    campaign = nightly(door)
    refused = [
        {
            "class": "auth",
            "message": "token request to https://iam: 401: invalid_client",
            "client": None,
            "phase": "credential",
        }
    ]
    measured(door, campaign, status="failed", errors=refused)
    regression = pass_at(NOW)
    assert regression is not None and regression.severity == "critical"
    assert regression.summary.startswith(
        "the oauth client of endpoint door (site T2_XX): its latest run got no token: "
    )
    assert "invalid_client" in regression.summary


def test_a_credential_that_no_longer_decrypts_is_a_critical_alert_not_a_crash() -> None:
    door = endpoint()
    nightly(door)
    stranger = Fernet(Fernet.generate_key()).encrypt(b"a token").decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sites_endpoint SET credential = %s WHERE id = %s", [stranger, door.pk]
        )
    regression = pass_at(NOW)
    assert regression is not None and regression.severity == "critical"
    assert "does not decrypt with FEDPROBE_CREDENTIAL_KEY" in regression.summary


def test_an_alert_resolved_by_hand_stays_resolved_until_the_credential_is_replaced() -> None:
    door = endpoint()
    nightly(door)
    first = pass_at(NOW)
    assert first is not None
    regression_resolve(regression=first, user=user("op"), note="renewal ordered")
    assert pass_at(NOW + timedelta(hours=1)) == first
    assert not Regression.objects.filter(state__in=Regression.LIVE).exists()

    replace_credential(door, token_expiring(NOW + timedelta(days=2)))
    second = pass_at(NOW + timedelta(hours=2))
    assert second is not None and second.pk != first.pk
    assert second.state == State.TESTER_FAULT
