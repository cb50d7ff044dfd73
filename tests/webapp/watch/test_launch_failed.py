"""A scheduled slot whose launch failed for real (a credential that no longer decrypts, an
endpoint disabled since) raises a tester-fault regression naming the campaign, the slot and
the error, once; it is resolved when the next slot launches, or when the schedule is paused."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from tests.webapp.factories import (
    CampaignFactory,
    TestFileFactory,
    VantagePointFactory,
    page_for,
    user,
)
from webapp.campaigns.models import Campaign
from webapp.campaigns.schedules import campaign_schedule_pause, campaigns_launch_due
from webapp.sites.models import Endpoint
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.launches import campaign_launches_failed, launch_key
from webapp.watch.models import Regression

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]
State = Regression.State
# Runs go to a queue no worker of the suite consumes: these tests only count them.
NOBODY = "launch-failed-nobody"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def nightly() -> Campaign:
    campaign = CampaignFactory(
        name="nightly-reads",
        schedule="0 2 * * *",
        endpoints=[TestFileFactory().endpoint],
        vantage_points=[VantagePointFactory(name=NOBODY)],
    )
    Campaign.objects.filter(pk=campaign.pk).update(created_at=at("2026-03-01 00:00"))
    campaign.refresh_from_db()
    return campaign


def rotate_key_out(endpoint: Endpoint) -> None:
    """The endpoint's stored credential was encrypted with a key no longer configured."""
    stranger = Fernet(Fernet.generate_key()).encrypt(b"a token").decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sites_endpoint SET credential_kind = 'token', credential = %s WHERE id = %s",
            [stranger, endpoint.pk],
        )


def restore_key(endpoint: Endpoint) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sites_endpoint SET credential_kind = 'none', credential = '' WHERE id = %s",
            [endpoint.pk],
        )


def disable(endpoint: Endpoint) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=False)


def enable(endpoint: Endpoint) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=True)


@pytest.mark.parametrize(
    ("break_it", "fix_it", "error"),
    [
        (rotate_key_out, restore_key, "does not decrypt with FEDPROBE_CREDENTIAL_KEY"),
        (disable, enable, "matrix: its endpoints are all disabled"),
    ],
)
def test_a_slot_that_launched_nothing_is_a_tester_fault_until_the_next_slot_launches(
    break_it: Callable[[Endpoint], None], fix_it: Callable[[Endpoint], None], error: str
) -> None:
    campaign = nightly()
    (endpoint,) = campaign.endpoints.all()
    break_it(endpoint)
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert (launch.run_count, error in launch.error) == (0, True)

    watch_evaluate(now=at("2026-03-10 02:45"))
    regression = Regression.objects.get(key=launch_key(campaign.pk))
    assert (regression.state, regression.severity) == (State.TESTER_FAULT, "critical")
    assert regression.summary.startswith(
        "campaign nightly-reads: the slot 2026-03-10 02:00 UTC launched nothing: "
    )
    assert error in regression.summary
    assert regression.blame["target"] == "campaign"
    assert (regression.blame["slot"], error in regression.blame["error"]) == (
        "2026-03-10T02:00:00+00:00",
        True,
    )
    watch_evaluate(now=at("2026-03-10 03:45"))
    assert list(regression.events.values_list("state", flat=True)) == ["tester-fault"]

    fix_it(endpoint)
    (tomorrow,) = campaigns_launch_due(now=at("2026-03-11 02:00:30"))
    assert (tomorrow.run_count, tomorrow.error) == (1, "")
    watch_evaluate(now=at("2026-03-11 02:45"))
    regression.refresh_from_db()
    assert regression.state == State.RESOLVED
    resolved = regression.events.get(state=State.RESOLVED)
    assert resolved.note == "the slot 2026-03-11 02:00 UTC launched 1 runs"


def test_a_later_failed_slot_updates_the_regression_and_a_pause_resolves_it() -> None:
    campaign = nightly()
    (endpoint,) = campaign.endpoints.all()
    disable(endpoint)
    campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    watch_evaluate(now=at("2026-03-10 02:45"))
    campaigns_launch_due(now=at("2026-03-11 02:00:30"))
    watch_evaluate(now=at("2026-03-11 02:45"))
    (regression,) = Regression.objects.all()
    assert regression.state == State.TESTER_FAULT
    assert "slot 2026-03-11 02:00 UTC" in regression.summary
    assert regression.events.count() == 1
    home = page_for(user("v", "viewer")).get("/").content.decode()
    tester_faults = home.split('id="home-tester-faults"')[1]
    assert "campaign nightly-reads</a>" in tester_faults

    campaign_schedule_pause(campaign=campaign)
    watch_evaluate(now=at("2026-03-11 03:45"))
    regression.refresh_from_db()
    assert regression.state == State.RESOLVED
    assert "no longer launches by schedule" in regression.events.get(state="resolved").note


def test_a_slot_that_launched_raises_nothing() -> None:
    nightly()
    (launch,) = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert launch.run_count == 1
    watch_evaluate(now=at("2026-03-10 02:45"))
    assert not Regression.objects.exists()


def test_the_launches_are_read_in_two_queries_whatever_their_number(
    django_assert_max_num_queries: Any,
) -> None:
    campaigns = [nightly() for _ in range(5)]
    for campaign in campaigns:
        disable(campaign.endpoints.get())
    campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert len(campaign_launches_failed(now=at("2026-03-10 02:45"))) == 5
    with django_assert_max_num_queries(2):
        assert campaign_launches_failed(now=at("2026-03-10 03:45")) == []
