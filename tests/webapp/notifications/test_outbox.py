"""The outbox, end to end against real receivers: each state change told once to each
matching subscriber, retried while the receiver is down, refused where egress is refused,
the daily digest once a day. Clocks are frozen (`clock=`): the receivers are real."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.webapp.factories import EndpointFactory, VantagePointFactory, user
from tests.webapp.notifications.conftest import T0, HttpReceiver, SmtpReceiver, move, regression
from webapp.notifications.models import Delivery, EventFanOut, Subscription
from webapp.notifications.outbox import notifications_pump
from webapp.watch.models import Regression, RegressionEvent

pytestmark = pytest.mark.django_db
State = Regression.State


def pump(at: datetime) -> Any:
    return notifications_pump(clock=lambda: at)


def webhook(receiver: HttpReceiver, **fields: Any) -> Subscription:
    values = {"channel": "webhook", "url": receiver.url, "url_shown": "http://127.0.0.1/…"}
    owner = user(f"ops-{Subscription.objects.count()}")
    return Subscription.objects.create(owner=owner, **{**values, **fields})


def test_each_notified_state_change_reaches_the_subscriber_once(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    webhook(http_receiver)
    row = regression()
    move(row, State.OPEN, State.ACKNOWLEDGED, State.RECOVERING, State.RESOLVED)
    pump(T0 + timedelta(minutes=1))
    pump(T0 + timedelta(minutes=2))

    bodies = [r.body for r in http_receiver.received]
    assert [b["event"] for b in bodies] == ["confirmed", "recovering", "resolved"]
    assert [(b["previous_state"], b["state"]) for b in bodies] == [
        ("pending", "open"),
        ("acknowledged", "recovering"),
        ("recovering", "resolved"),
    ]
    assert bodies[0]["link"] == f"http://testserver.example/regressions/{row.pk}/"
    assert bodies[0]["summary"] == row.summary and bodies[0]["severity"] == "warning"
    assert bodies[0]["blame"]["rule"] == "one site, every vantage point"
    assert len(set(http_receiver.keys())) == 3
    assert [b["delivery_id"] for b in bodies] == http_receiver.keys()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}


@pytest.fixture(autouse=True)
def _base_url(settings: Any) -> None:
    settings.FEDPROBE_BASE_URL = "http://testserver.example"


def test_a_new_open_regression_is_told_as_opened_and_reopening_as_reopened(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    webhook(http_receiver)
    row = regression(state=State.OPEN)
    RegressionEvent.objects.create(regression=row, state=State.OPEN, previous_state="", at=T0)
    move(row, State.RECOVERING, State.OPEN)
    pump(T0 + timedelta(minutes=1))

    assert [r.body["event"] for r in http_receiver.received] == [
        "opened",
        "recovering",
        "reopened",
    ]


def test_silenced_regressions_and_members_of_a_blamed_group_are_not_told(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    webhook(http_receiver)
    group = regression(key="vantage-point:local:availability", endpoint=EndpointFactory())
    member = regression(parent=group)
    silenced = regression(silenced_until=T0 + timedelta(days=2))
    for row in (group, member, silenced):
        move(row, State.OPEN)
    pump(T0 + timedelta(minutes=1))

    assert [r.body["regression_id"] for r in http_receiver.received] == [group.pk]
    skipped = dict(EventFanOut.objects.values_list("event__regression_id", "skipped"))
    assert skipped[member.pk] == "a member of a blamed group"
    assert skipped[silenced.pk] == "silenced"


def test_subscribers_are_told_only_about_their_target(http_receiver: HttpReceiver) -> None:
    http_receiver.start()
    watched, other = EndpointFactory(), EndpointFactory()
    elsewhere = VantagePointFactory(name="remote")
    by_target = {
        "site": webhook(http_receiver, target="site", target_id=watched.site_id),
        "endpoint": webhook(http_receiver, target="endpoint", target_id=watched.pk),
        "vantage_point": webhook(http_receiver, target="vantage_point", target_id=elsewhere.pk),
    }
    move(regression(endpoint=watched), State.OPEN)
    move(regression(endpoint=other), State.OPEN)
    pump(T0 + timedelta(minutes=1))

    told = set(Delivery.objects.values_list("subscription_id", flat=True))
    assert told == {by_target["site"].pk, by_target["endpoint"].pk}
    assert len(http_receiver.received) == 2


def test_states_not_notified_make_no_delivery(http_receiver: HttpReceiver) -> None:
    http_receiver.start()
    webhook(http_receiver)
    move(regression(), State.NO_DATA)
    move(regression(), State.OPEN, State.ACKNOWLEDGED)
    pump(T0 + timedelta(minutes=1))

    assert [r.body["event"] for r in http_receiver.received] == ["confirmed"]


def test_a_receiver_that_was_down_gets_the_message_once_after_it_returns(
    http_receiver: HttpReceiver, settings: Any
) -> None:
    settings.FEDPROBE_NOTIFY_RETRY_BASE_S = 30
    webhook(http_receiver)
    move(regression(), State.OPEN)

    pump(T0 + timedelta(seconds=1))  # the port is closed
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert "cannot reach the receiver" in delivery.last_error
    assert delivery.next_attempt_at == T0 + timedelta(seconds=31)
    pump(T0 + timedelta(seconds=20))  # not yet due: not tried
    assert Delivery.objects.get().attempts == 1
    pump(T0 + timedelta(seconds=40))  # down again: the wait doubles
    assert Delivery.objects.get().next_attempt_at == T0 + timedelta(seconds=100)

    http_receiver.start()
    pump(T0 + timedelta(seconds=101))
    pump(T0 + timedelta(seconds=400))
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("sent", 3, "")
    assert len(http_receiver.received) == 1


def test_a_delivery_is_failed_once_older_than_the_max_age(
    http_receiver: HttpReceiver, settings: Any
) -> None:
    settings.FEDPROBE_NOTIFY_MAX_AGE_S = 3600
    webhook(http_receiver)
    move(regression(), State.OPEN)
    pump(T0 + timedelta(seconds=1))
    Delivery.objects.update(next_attempt_at=T0)
    pump(T0 + timedelta(hours=2))

    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and delivery.attempts == 2


def test_the_egress_policy_is_checked_again_when_connecting(
    http_receiver: HttpReceiver, settings: Any
) -> None:
    http_receiver.start()
    webhook(http_receiver, url=f"http://localhost:{http_receiver.port}/hook")
    settings.FEDPROBE_EGRESS_ALLOW = []  # loopback no longer allowed since it was saved
    move(regression(), State.OPEN)
    pump(T0 + timedelta(seconds=1))

    delivery = Delivery.objects.get()
    assert delivery.status == "failed"
    assert "refused by egress policy" in delivery.last_error
    assert http_receiver.received == []


def test_a_redirect_is_not_followed(http_receiver: HttpReceiver) -> None:
    elsewhere = HttpReceiver().start()
    try:
        http_receiver.status, http_receiver.location = 307, elsewhere.url
        http_receiver.start()
        webhook(http_receiver)
        move(regression(), State.OPEN)
        pump(T0 + timedelta(seconds=1))
    finally:
        elsewhere.stop()

    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and "redirect, not followed" in delivery.last_error
    assert len(http_receiver.received) == 1 and elsewhere.received == []


def test_a_server_error_is_tried_again_and_a_client_error_is_not(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.status = 503
    http_receiver.start()
    webhook(http_receiver)
    move(regression(), State.OPEN)
    pump(T0 + timedelta(seconds=1))
    assert Delivery.objects.get().status == "pending"

    http_receiver.status = 404
    pump(T0 + timedelta(minutes=5))
    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and delivery.last_error == "the receiver answered 404"


def test_slack_format_is_one_text_with_the_link(http_receiver: HttpReceiver) -> None:
    http_receiver.start()
    webhook(http_receiver, format="slack")
    row = regression()
    move(row, State.OPEN)
    pump(T0 + timedelta(seconds=1))

    (received,) = http_receiver.received
    assert set(received.body) == {"text"}
    assert f"http://testserver.example/regressions/{row.pk}/" in received.body["text"]
    assert "confirmed" in received.body["text"]


def test_the_secret_goes_in_its_header_and_never_into_errors_or_logs(
    http_receiver: HttpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-token-0123456789abcdef"
    http_receiver.status = 500
    http_receiver.start()
    webhook(
        http_receiver,
        url=f"{http_receiver.url}?token=q-{secret}",
        secret_header="X-Token",
        secret=secret,
    )
    move(regression(), State.OPEN)
    with caplog.at_level(logging.DEBUG):
        pump(T0 + timedelta(seconds=1))

    (received,) = http_receiver.received
    assert received.headers["X-Token"] == secret
    assert received.path == f"/hook?token=q-{secret}"
    assert secret not in Delivery.objects.get().last_error
    assert secret not in caplog.text and "trying again" in caplog.text


def test_email_reaches_a_real_smtp_server_with_the_link(smtp_receiver: SmtpReceiver) -> None:
    owner = user("mail")
    owner.email = "ops@example.org"
    owner.save()
    Subscription.objects.create(owner=owner, channel="email", email=owner.email)
    row = regression()
    move(row, State.OPEN, State.RECOVERING)
    pump(T0 + timedelta(seconds=1))
    pump(T0 + timedelta(seconds=2))

    assert [m["To"] for m in smtp_receiver.messages] == ["ops@example.org"] * 2
    first = smtp_receiver.messages[0]
    assert first["Subject"].startswith("[fedprobe] confirmed: warning throughput of")
    assert f"http://testserver.example/regressions/{row.pk}/" in first.get_payload()
    ids = {m["Message-ID"] for m in smtp_receiver.messages}
    assert ids == {f"<{d.idempotency_key}@fedprobe>" for d in Delivery.objects.all()}


def test_the_digest_is_sent_once_a_day_at_its_hour(
    smtp_receiver: SmtpReceiver, settings: Any
) -> None:
    settings.FEDPROBE_DIGEST_HOUR = 7
    owner = user("digest")
    Subscription.objects.create(owner=owner, channel="email", email="d@example.org", digest=True)
    opened, resolved, fault = regression(), regression(), regression()
    move(opened, State.OPEN)
    move(resolved, State.OPEN, State.RESOLVED)
    move(fault, State.TESTER_FAULT)
    next_day = T0.replace(hour=0) + timedelta(days=1)

    pump(next_day + timedelta(hours=6, minutes=59))
    assert smtp_receiver.messages == [] and not Delivery.objects.exists()
    pump(next_day + timedelta(hours=7, minutes=1))
    pump(next_day + timedelta(hours=9))

    (digest,) = smtp_receiver.messages
    assert " ".join(digest["Subject"].split()) == (
        "[fedprobe] digest of 2026-11-20: 2 opened, 1 resolved, 1 still open, 1 tester faults"
    )
    text = digest.get_payload()
    assert f"/regressions/{fault.pk}/" in text.split("Tester faults (1):")[1]
    assert Delivery.objects.get().digest_day.isoformat() == "2026-11-20"


def test_a_user_without_a_role_any_more_is_told_nothing(http_receiver: HttpReceiver) -> None:
    http_receiver.start()
    kept = webhook(http_receiver)
    demoted = webhook(http_receiver)
    demoted.owner.groups.clear()
    move(regression(), State.OPEN)
    pump(T0 + timedelta(seconds=1))

    assert list(Delivery.objects.values_list("subscription_id", flat=True)) == [kept.pk]
