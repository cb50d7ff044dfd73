"""Changing a regression's state: the one place that does it, so that every change is a
conditional update and writes its `RegressionEvent` (the notifications' outbox) in the same
transaction. The watch's pass and people (acknowledge, resolve by hand) both come here."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from webapp.watch.models import Regression, RegressionEvent

State = Regression.State

# Which state may follow which. The watch moves a regression along the arrows as nights come
# in; people acknowledge (open, recovering -> acknowledged) and resolve by hand.
TRANSITIONS: dict[str, frozenset[str]] = {
    State.PENDING: frozenset({State.OPEN, State.RESOLVED, State.NO_DATA, State.TESTER_FAULT}),
    State.OPEN: frozenset(
        {State.ACKNOWLEDGED, State.RECOVERING, State.RESOLVED, State.NO_DATA, State.TESTER_FAULT}
    ),
    State.ACKNOWLEDGED: frozenset(
        {State.RECOVERING, State.RESOLVED, State.NO_DATA, State.TESTER_FAULT}
    ),
    State.RECOVERING: frozenset(
        {State.OPEN, State.ACKNOWLEDGED, State.RESOLVED, State.NO_DATA, State.TESTER_FAULT}
    ),
    State.NO_DATA: frozenset({State.OPEN, State.PENDING, State.RESOLVED, State.TESTER_FAULT}),
    State.TESTER_FAULT: frozenset({State.OPEN, State.PENDING, State.RESOLVED, State.NO_DATA}),
    State.RESOLVED: frozenset(),
}


class TransitionRefused(Exception):
    """The regression is not (or no longer) in a state the change may leave."""


def regression_set_state(
    *,
    regression: Regression,
    state: str,
    at: datetime,
    actor: User | None = None,
    note: str = "",
) -> RegressionEvent:
    """Move `regression` to `state` and record the event, or refuse (TransitionRefused) when
    its stored state does not allow it. The update is conditional on the state read, so two
    passes (or a pass and a person) never both move it; `regression` is updated in place."""
    previous = regression.state
    if state not in TRANSITIONS[previous]:
        raise TransitionRefused(f"a {previous} regression cannot become {state}")
    changes: dict[str, object] = {"state": state}
    if state == State.RESOLVED:
        changes["resolved_at"] = at
    if state == State.ACKNOWLEDGED and actor is not None:
        changes.update(acknowledged_by=actor, acknowledged_at=at, ack_note=note)
    with transaction.atomic():
        moved = Regression.objects.filter(pk=regression.pk, state=previous).update(**changes)
        if not moved:
            raise TransitionRefused(f"regression {regression.pk} changed meanwhile")
        event = RegressionEvent.objects.create(
            regression=regression,
            state=state,
            previous_state=previous,
            at=at,
            actor=actor,
            note=note,
        )
    for name, value in changes.items():
        setattr(regression, name, value)
    return event
