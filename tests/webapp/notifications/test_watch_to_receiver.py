"""From runs to a message, end to end: the watch's pass finds what the runs say (or what a
scheduled campaign's credential will do to them), and the notification pump tells a real
webhook receiver once per state change, once per blamed group, and nothing more when the
pass runs again."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import pytest

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    jwt,
    user,
)
from tests.webapp.notifications.conftest import HttpReceiver
from tests.webapp.watch.nights import NIGHT_ONE, Series, at, run, series
from webapp.campaigns.models import Run
from webapp.campaigns.services import runs_resend_stale
from webapp.notifications.models import Subscription
from webapp.notifications.outbox import notifications_pump
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _base_url(settings: Any) -> None:
    settings.FEDPROBE_BASE_URL = "http://testserver.example"


def night(n: int) -> date:
    return NIGHT_ONE + timedelta(days=n)


def watch_and_pump(n: int) -> None:
    """The night's pass at 06:00, then the pump a minute later and again a minute after."""
    watch_evaluate(now=at(night(n), 6))
    for minutes in (1, 2):
        pumped_at: datetime = at(night(n), 6) + timedelta(minutes=minutes)
        notifications_pump(clock=lambda moment=pumped_at: moment)


def subscribe(receiver: HttpReceiver) -> Subscription:
    return Subscription.objects.create(
        owner=user("ops"), channel="webhook", url=receiver.url, url_shown="http://127.0.0.1/…"
    )


def good(of: Series, n: int) -> None:
    run(of, night(n), throughput_mbps=10.0)
    run(of, night(n), throughput_mbps=10.5)


def test_a_broken_endpoint_is_told_opened_then_recovering_and_resolved_once_each(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    subscribe(http_receiver)
    one = series()
    run(one, night(0), status="failed", error="auth")
    run(one, night(0), status="failed", error="auth")
    watch_and_pump(0)
    watch_and_pump(0)  # the same pass again: nothing new to tell
    for n in (1, 2, 3, 4):
        good(one, n)
        watch_and_pump(n)

    bodies = [r.body for r in http_receiver.received]
    assert [b["event"] for b in bodies] == ["opened", "recovering", "resolved"]
    assert {b["regression_id"] for b in bodies} == {bodies[0]["regression_id"]}
    assert bodies[0]["severity"] == "critical"
    assert "auth" in bodies[0]["summary"]
    assert len(set(http_receiver.keys())) == 3


def test_a_vantage_point_bad_at_every_site_is_one_message_not_one_per_site(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    subscribe(http_receiver)
    endpoints = [EndpointFactory(site=SiteFactory()) for _ in range(4)]
    for endpoint in endpoints:
        run(series(endpoint=endpoint, vantage_point="remote"), night(0), status="timeout")
        good(series(endpoint=endpoint, vantage_point="local"), 0)
    watch_and_pump(0)

    bodies = [r.body for r in http_receiver.received]
    assert [(b["event"], b["blame"]["target"]) for b in bodies] == [("opened", "vantage-point")]
    assert "remote" in bodies[0]["summary"]


def token_expiring(moment: datetime) -> str:
    return jwt(iss="https://iam.example.org/", sub="robot", exp=int(moment.timestamp()))


def test_an_expiring_credential_is_told_to_its_site_once_and_its_replacement_once(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    site = SiteFactory(name="T2_XX")
    Subscription.objects.create(
        owner=user("ops"),
        channel="webhook",
        target="site",
        target_id=site.pk,
        url=http_receiver.url,
        url_shown="http://127.0.0.1/…",
    )
    door = EndpointFactory(
        name="door",
        site=site,
        protocol="https",
        base_url="https://127.0.0.1:8443/",
        credential_kind="token",
        credential=token_expiring(at(night(0), 6) + timedelta(days=3)),
    )
    TestFileFactory(endpoint=door)
    CampaignFactory(name="nightly", endpoints=[door], schedule="0 2 * * *")
    watch_and_pump(0)
    watch_and_pump(0)  # the same pass again
    watch_and_pump(1)  # the next night: still the same credential
    door.credential = token_expiring(at(night(0), 6) + timedelta(days=60))
    door.save(update_fields=["credential"])
    watch_and_pump(2)
    watch_and_pump(3)

    bodies = [r.body for r in http_receiver.received]
    assert [(b["event"], b["blame"]["target"]) for b in bodies] == [
        ("tester-fault", "credential"),
        ("resolved", "credential"),
    ]
    assert bodies[0]["summary"].startswith(
        "the token of endpoint door (site T2_XX) expires at 2026-10-04 06:00 UTC"
    )
    assert bodies[0]["severity"] == "warning"
    assert len(set(http_receiver.keys())) == 2


def test_a_vantage_point_whose_worker_is_gone_is_one_message_with_the_command(
    http_receiver: HttpReceiver,
) -> None:
    """The scheduled runs of a vantage point with no worker wait; beat's resend pass sends
    them again and then fails them as never taken (the tester's fault); the watch tells one
    not-run alert on the vantage point, with the command, not one tester fault per series."""
    http_receiver.start()
    subscribe(http_receiver)
    endpoints = [EndpointFactory(site=SiteFactory()) for _ in range(4)]
    for endpoint in endpoints:
        run(
            series(endpoint=endpoint, vantage_point="remote"),
            night(0),
            status=Run.Status.QUEUED,
            trigger=Run.Trigger.SCHEDULE,
            created=at(night(0)),
        )
        good(series(endpoint=endpoint, vantage_point="local"), 0)
    for minutes in range(1, 31):  # beat's resend pass, every minute for half an hour
        runs_resend_stale(now=at(night(0)) + timedelta(minutes=minutes))
    assert not Run.objects.filter(status=Run.Status.QUEUED).exists()
    watch_and_pump(0)

    bodies = [r.body for r in http_receiver.received]
    assert [(b["event"], b["blame"]["target"]) for b in bodies] == [
        ("tester-fault", "vantage-point")
    ]
    assert "celery -A webapp worker -Q vantage.remote" in bodies[0]["summary"]
    alert = Regression.objects.get(key="vp:remote:not-run")
    assert alert.pk == bodies[0]["regression_id"]
    assert alert.members.count() == 4
    assert not Regression.objects.filter(parent=None).exclude(pk=alert.pk).exists()
