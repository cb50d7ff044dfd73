"""What people do to a regression: acknowledge (who, when, why), resolve by hand, silence
until a time and lift it; each refused where the regression's state does not allow it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from tests.webapp.factories import RegressionFactory, user
from webapp.watch.actions import (
    regression_acknowledge,
    regression_resolve,
    regression_silence,
    regression_unsilence,
)
from webapp.watch.models import Regression, RegressionEvent
from webapp.watch.states import TransitionRefused

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
State = Regression.State


def test_acknowledging_records_who_when_and_the_note_and_writes_the_event() -> None:
    regression = RegressionFactory()
    alice = user("alice")
    regression_acknowledge(regression=regression, user=alice, note="ticket GGUS-1234", now=NOW)
    stored = Regression.objects.get(pk=regression.pk)
    assert (stored.state, stored.acknowledged_by, stored.acknowledged_at, stored.ack_note) == (
        State.ACKNOWLEDGED,
        alice,
        NOW,
        "ticket GGUS-1234",
    )
    event = RegressionEvent.objects.get(regression=regression)
    assert (event.previous_state, event.state, event.actor, event.note) == (
        State.OPEN,
        State.ACKNOWLEDGED,
        alice,
        "ticket GGUS-1234",
    )


@pytest.mark.parametrize("state", [State.PENDING, State.RESOLVED, State.NO_DATA])
def test_acknowledging_a_regression_not_open_is_refused_and_changes_nothing(state: str) -> None:
    regression = RegressionFactory(state=state)
    with pytest.raises(TransitionRefused):
        regression_acknowledge(regression=regression, user=user("alice"), note="x", now=NOW)
    assert Regression.objects.get(pk=regression.pk).state == state
    assert not RegressionEvent.objects.exists()


def test_acknowledging_without_a_note_is_refused_naming_the_note() -> None:
    regression = RegressionFactory()
    with pytest.raises(ValidationError) as refused:
        regression_acknowledge(regression=regression, user=user("alice"), note="  ", now=NOW)
    assert list(refused.value.message_dict) == ["note"]
    assert Regression.objects.get(pk=regression.pk).state == State.OPEN


@pytest.mark.parametrize("state", [State.PENDING, State.ACKNOWLEDGED, State.TESTER_FAULT])
def test_resolving_by_hand_resolves_any_live_regression_with_its_time(state: str) -> None:
    regression = RegressionFactory(state=state)
    regression_resolve(regression=regression, user=user("bob"), note="fixed", now=NOW)
    stored = Regression.objects.get(pk=regression.pk)
    assert (stored.state, stored.resolved_at) == (State.RESOLVED, NOW)
    assert RegressionEvent.objects.get(regression=regression).actor.username == "bob"


def test_resolving_a_resolved_regression_is_refused() -> None:
    regression = RegressionFactory(state=State.RESOLVED)
    with pytest.raises(TransitionRefused):
        regression_resolve(regression=regression, user=user("bob"), now=NOW)


def test_silencing_stores_until_who_and_why_without_changing_the_state() -> None:
    regression = RegressionFactory()
    until = NOW + timedelta(days=3)
    carol = user("carol")
    regression_silence(regression=regression, user=carol, until=until, note="site in GGUS", now=NOW)
    stored = Regression.objects.get(pk=regression.pk)
    assert (stored.state, stored.silenced_until, stored.silenced_by, stored.silence_note) == (
        State.OPEN,
        until,
        carol,
        "site in GGUS",
    )
    assert not RegressionEvent.objects.exists()  # not a state change: nothing to notify


@pytest.mark.parametrize(
    ("until", "note", "field"),
    [
        (NOW - timedelta(minutes=1), "why", "until"),
        (NOW, "why", "until"),
        (NOW + timedelta(days=90, minutes=1), "why", "until"),
        (NOW + timedelta(days=1), "", "note"),
    ],
)
def test_a_silence_in_the_past_too_long_or_without_a_note_is_refused_naming_the_field(
    until: datetime, note: str, field: str
) -> None:
    regression = RegressionFactory()
    with pytest.raises(ValidationError) as refused:
        regression_silence(regression=regression, user=user("c"), until=until, note=note, now=NOW)
    assert list(refused.value.message_dict) == [field]
    assert Regression.objects.get(pk=regression.pk).silenced_until is None


def test_silencing_for_exactly_ninety_days_is_allowed() -> None:
    regression = RegressionFactory()
    until = NOW + timedelta(days=90)
    regression_silence(regression=regression, user=user("c"), until=until, note="x", now=NOW)
    assert Regression.objects.get(pk=regression.pk).silenced_until == until


def test_a_resolved_regression_cannot_be_silenced() -> None:
    regression = RegressionFactory(state=State.RESOLVED)
    with pytest.raises(TransitionRefused):
        regression_silence(
            regression=regression, user=user("c"), until=NOW + timedelta(days=1), note="x", now=NOW
        )
    assert Regression.objects.get(pk=regression.pk).silenced_until is None


def test_unsilencing_clears_the_silence() -> None:
    regression = RegressionFactory()
    regression_silence(
        regression=regression, user=user("c"), until=NOW + timedelta(days=1), note="x", now=NOW
    )
    regression_unsilence(regression=regression)
    stored = Regression.objects.get(pk=regression.pk)
    assert (stored.silenced_until, stored.silenced_by, stored.silence_note) == (None, None, "")
