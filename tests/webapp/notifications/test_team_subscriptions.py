"""A team's subscriptions, against real receivers: its email reaches each member's own
address once per change (a member removed gets nothing, also of what was made for them
before), its webhook once; an address subscribed twice (its own and its team's) is told once;
the digest reaches each member once a day. Who may subscribe a team, see and change its
subscriptions. The outbox's tests run on SQLite too (bin/run's database)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.webapp.factories import api_for, member, team, user
from tests.webapp.notifications.conftest import T0, HttpReceiver, SmtpReceiver, move, regression
from webapp.accounts.services import team_member_remove
from webapp.notifications.models import Delivery, EventFanOut, Subscription
from webapp.notifications.outbox import events_fan_out, notifications_pump
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db
State = Regression.State


def pump(at: datetime) -> Any:
    return notifications_pump(clock=lambda: at)


def recipients(smtp: SmtpReceiver) -> list[str]:
    return sorted(str(m["To"]) for m in smtp.messages)


@pytest.fixture(autouse=True)
def _base_url(settings: Any) -> None:
    settings.FEDPROBE_BASE_URL = "http://testserver.example"


@pytest.mark.sqlite  # the fan-out's SQL (NULLS FIRST, partial unique keys)
def test_a_team_email_reaches_each_member_once_and_a_removed_member_gets_none(
    smtp_receiver: SmtpReceiver,
) -> None:
    lead = member("lead", role="operator")
    ana, bo, cy = member("ana"), member("bo"), member("cy")
    ops = team("storage-ops", manager=lead, members=[ana, bo, cy])
    answer = api_for(ana).post("/api/v1/subscriptions/", {"channel": "email", "team": ops.pk})
    assert answer.status_code == 201, answer.json()
    assert answer.json()["owner"] is None and answer.json()["team_name"] == "storage-ops"
    team_member_remove(team=ops, by=lead, user=cy)

    row = regression()
    move(row, State.OPEN)
    pump(T0 + timedelta(seconds=1))
    pump(T0 + timedelta(seconds=2))

    assert recipients(smtp_receiver) == [
        "ana@example.org",
        "bo@example.org",
        "lead@example.org",
    ]
    assert {m["Subject"].split(":")[0] for m in smtp_receiver.messages} == {"[fedprobe] confirmed"}
    assert len({m["Message-ID"] for m in smtp_receiver.messages}) == 3
    assert f"/regressions/{row.pk}/" in smtp_receiver.messages[0].get_payload()


@pytest.mark.sqlite  # the fan-out's SQL (NULLS FIRST, partial unique keys)
def test_a_member_removed_after_the_fan_out_is_not_sent_what_was_made_for_them(
    smtp_receiver: SmtpReceiver,
) -> None:
    lead = member("lead", role="operator")
    gone = member("gone")
    ops = team("ops", manager=lead, members=[gone])
    Subscription.objects.create(team=ops, channel="email")
    move(regression(), State.OPEN)
    made = pump(T0 + timedelta(seconds=1))
    assert made.made == 2 and len(made.sent) == 2
    move(regression(), State.OPEN)
    assert events_fan_out(now=T0 + timedelta(seconds=2)) == 2
    team_member_remove(team=ops, by=gone, user=gone)  # leaves before the pass sends it
    outcome = pump(T0 + timedelta(seconds=3))

    assert len(outcome.sent) == 1 and len(outcome.dropped) == 1
    assert recipients(smtp_receiver) == ["gone@example.org", "lead@example.org", "lead@example.org"]
    dropped = Delivery.objects.get(status="dropped")
    assert dropped.recipient == gone and "no longer in team ops" in dropped.last_error
    pump(T0 + timedelta(minutes=10))
    assert len(smtp_receiver.messages) == 3


@pytest.mark.sqlite  # the fan-out's SQL (NULLS FIRST, partial unique keys)
def test_a_member_who_leaves_one_of_two_subscribed_teams_is_still_told_once(
    smtp_receiver: SmtpReceiver,
) -> None:
    lead = member("lead", role="operator")
    ana = member("ana")
    ops = team("ops", manager=lead, members=[ana])
    other = team("other", manager=lead, members=[ana])
    Subscription.objects.create(team=ops, channel="email")
    Subscription.objects.create(team=other, channel="email")
    move(regression(), State.OPEN)
    assert events_fan_out(now=T0 + timedelta(seconds=1)) == 2  # ana once, through ops
    (made_for_ana,) = Delivery.objects.filter(recipient=ana)
    assert made_for_ana.subscription.team == ops
    team_member_remove(team=ops, by=ana, user=ana)  # leaves ops before the pass sends it
    first = pump(T0 + timedelta(seconds=2))
    second = pump(T0 + timedelta(seconds=3))
    pump(T0 + timedelta(minutes=10))

    assert len(first.dropped) == 1 and len(second.sent) == 1
    assert recipients(smtp_receiver) == ["ana@example.org", "lead@example.org"]
    dropped = Delivery.objects.get(status="dropped")
    assert "handed over to team other" in dropped.last_error
    assert Delivery.objects.get(recipient=ana, status="sent").subscription.team == other


def test_a_team_webhook_is_posted_once_not_once_per_member(
    http_receiver: HttpReceiver,
) -> None:
    http_receiver.start()
    lead = member("lead", role="operator")
    ops = team("ops", manager=lead, members=[member("ana"), member("bo")])
    answer = api_for(lead).post(
        "/api/v1/subscriptions/", {"channel": "webhook", "team": ops.pk, "url": http_receiver.url}
    )
    assert answer.status_code == 201, answer.json()
    move(regression(), State.OPEN, State.RESOLVED)
    pump(T0 + timedelta(seconds=1))
    pump(T0 + timedelta(seconds=2))

    assert [r.body["event"] for r in http_receiver.received] == ["confirmed", "resolved"]
    assert Delivery.objects.filter(recipient__isnull=False).count() == 0


@pytest.mark.sqlite  # the fan-out's SQL (NULLS FIRST, partial unique keys)
def test_an_address_subscribed_by_itself_and_by_its_team_is_told_once(
    smtp_receiver: SmtpReceiver,
) -> None:
    lead = member("lead", role="operator")
    ana = member("ana")
    ops = team("ops", manager=lead, members=[ana])
    other = team("other", manager=lead, members=[ana])
    Subscription.objects.create(owner=ana, channel="email", email="ANA@example.org")
    Subscription.objects.create(team=ops, channel="email")
    Subscription.objects.create(team=other, channel="email", target="site", target_id=1)
    endpoint_row = regression()
    Subscription.objects.filter(team=other).update(target_id=endpoint_row.site_id)
    move(endpoint_row, State.OPEN)
    pump(T0 + timedelta(seconds=1))

    assert recipients(smtp_receiver) == ["ANA@example.org", "lead@example.org"]
    own = Delivery.objects.get(recipient__isnull=True)
    assert own.subscription.owner == ana


def test_a_member_without_a_role_or_an_address_gets_nothing(smtp_receiver: SmtpReceiver) -> None:
    lead = member("lead", role="operator")
    no_role, no_address = member("norole"), member("noaddress")
    ops = team("ops", manager=lead, members=[no_role, no_address])
    no_role.groups.clear()
    no_address.email = ""
    no_address.save()
    Subscription.objects.create(team=ops, channel="email")
    move(regression(), State.OPEN)
    pump(T0 + timedelta(seconds=1))

    assert recipients(smtp_receiver) == ["lead@example.org"]


@pytest.mark.sqlite  # the fan-out's SQL (NULLS FIRST, partial unique keys)
def test_the_digest_reaches_each_member_once_a_day(
    smtp_receiver: SmtpReceiver, settings: Any
) -> None:
    settings.FEDPROBE_DIGEST_HOUR = 7
    lead = member("lead", role="operator")
    ops = team("ops", manager=lead, members=[member("ana")])
    Subscription.objects.create(team=ops, channel="email", digest=True)
    move(regression(), State.OPEN)
    next_day = T0.replace(hour=0) + timedelta(days=1)

    pump(next_day + timedelta(hours=7, minutes=1))
    pump(next_day + timedelta(hours=7, minutes=2))
    pump(next_day + timedelta(hours=9))

    assert recipients(smtp_receiver) == ["ana@example.org", "lead@example.org"]
    assert {" ".join(m["Subject"].split())[:31] for m in smtp_receiver.messages} == {
        "[fedprobe] digest of 2026-11-20"
    }
    assert Delivery.objects.filter(digest_day="2026-11-20").count() == 2


def test_a_non_member_cannot_subscribe_a_team_and_nothing_is_saved() -> None:
    lead = member("lead", role="operator")
    ops = team("ops", manager=lead)
    outsider = member("outsider", role="operator")
    answer = api_for(outsider).post("/api/v1/subscriptions/", {"channel": "email", "team": ops.pk})
    assert answer.status_code == 403
    assert "subscribing team ops needs a member of it or an admin" in answer.json()["detail"]
    assert not Subscription.objects.exists()

    admin = user("root", role="admin")
    assert (
        api_for(admin).post("/api/v1/subscriptions/", {"channel": "email", "team": ops.pk})
    ).status_code == 201


def test_a_team_email_takes_no_address_of_its_own() -> None:
    lead = member("lead", role="operator")
    ops = team("ops", manager=lead)
    answer = api_for(lead).post(
        "/api/v1/subscriptions/",
        {"channel": "email", "team": ops.pk, "email": "list@example.org"},
    )
    assert answer.status_code == 400 and "email" in answer.json()
    assert not Subscription.objects.exists()


def test_members_see_and_change_their_teams_subscriptions_and_others_do_not() -> None:
    lead = member("lead", role="operator")
    ana, outsider = member("ana"), member("outsider")
    ops = team("ops", manager=lead, members=[ana])
    made = Subscription.objects.create(team=ops, channel="email")

    listed = api_for(ana).get("/api/v1/subscriptions/").json()["results"]
    assert [(s["id"], s["team"], s["team_name"]) for s in listed] == [(made.pk, ops.pk, "ops")]
    assert (
        api_for(ana).patch(f"/api/v1/subscriptions/{made.pk}/", {"digest": True}).status_code == 200
    )
    assert api_for(outsider).get("/api/v1/subscriptions/").json()["results"] == []
    assert (
        api_for(outsider).patch(f"/api/v1/subscriptions/{made.pk}/", {"active": False}).status_code
        == 404
    )
    team_member_remove(team=ops, by=lead, user=ana)
    assert api_for(ana).delete(f"/api/v1/subscriptions/{made.pk}/").status_code == 404
    assert Subscription.objects.get().active and Subscription.objects.get().digest


@pytest.mark.sqlite  # the partial unique keys on both databases
def test_an_event_fanned_out_again_makes_no_second_delivery_to_a_member(
    smtp_receiver: SmtpReceiver,
) -> None:
    lead = member("lead", role="operator")
    ops = team("ops", manager=lead, members=[member("ana")])
    Subscription.objects.create(team=ops, channel="email")
    move(regression(), State.OPEN)
    pump(T0 + timedelta(seconds=1))
    EventFanOut.objects.all().delete()  # as if the mark were lost: the keys still hold
    pump(T0 + timedelta(seconds=2))
    pump(T0 + timedelta(seconds=3))

    assert recipients(smtp_receiver) == ["ana@example.org", "lead@example.org"]
    assert Delivery.objects.count() == 2
