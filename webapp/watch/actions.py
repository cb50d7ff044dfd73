"""What people do to a regression: acknowledge it, resolve it by hand, silence it until a time
(and lift the silence). Operators and admins do these (docs/roles.md); viewers read.

Acknowledging and resolving change the state, so they go through `states.regression_set_state`
(a conditional update that writes the event). A silence is not a state: it only stores until
when (and by whom, why) notifications about the regression are held back; the watch still
moves its state, and the pages still show it, marked silenced.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from webapp.watch.models import Regression, RegressionEvent
from webapp.watch.states import TransitionRefused, regression_set_state

State = Regression.State

SILENCE_MAX = timedelta(days=90)  # a longer silence is a forgotten one: refused
NOTE_MAX_LENGTH = 2000

__all__ = [
    "NOTE_MAX_LENGTH",
    "SILENCE_MAX",
    "TransitionRefused",
    "regression_acknowledge",
    "regression_resolve",
    "regression_silence",
    "regression_unsilence",
]


def regression_acknowledge(
    *, regression: Regression, user: User, note: str, now: datetime | None = None
) -> RegressionEvent:
    """Someone is on it: an open (or recovering) regression becomes acknowledged, with who
    and why. Any other state: TransitionRefused. An empty note: ValidationError on `note`."""
    note = _note(note, required=True)
    return regression_set_state(
        regression=regression,
        state=State.ACKNOWLEDGED,
        at=now or timezone.now(),
        actor=user,
        note=note,
    )


def regression_resolve(
    *, regression: Regression, user: User, note: str = "", now: datetime | None = None
) -> RegressionEvent:
    """Resolved by hand, before the watch counted enough good nights (a resolved regression
    is never reopened: a new finding on the series is a new regression)."""
    return regression_set_state(
        regression=regression,
        state=State.RESOLVED,
        at=now or timezone.now(),
        actor=user,
        note=_note(note, required=False),
    )


def regression_silence(
    *,
    regression: Regression,
    user: User,
    until: datetime,
    note: str,
    now: datetime | None = None,
) -> Regression:
    """Hold its notifications back until `until` (in the future, at most SILENCE_MAX ahead),
    recording who and why. A resolved regression: TransitionRefused."""
    now = now or timezone.now()
    if until <= now:
        raise ValidationError({"until": "a silence must end in the future"})
    if until > now + SILENCE_MAX:
        latest = f"{now + SILENCE_MAX:%Y-%m-%d %H:%M} UTC"
        raise ValidationError(
            {"until": f"a silence may last at most {SILENCE_MAX.days} days (until {latest})"}
        )
    note = _note(note, required=True)
    _change_live(regression, silenced_until=until, silenced_by=user, silence_note=note)
    return regression


def regression_unsilence(*, regression: Regression) -> Regression:
    """Lift the silence now (its notifications flow again)."""
    _change_live(regression, silenced_until=None, silenced_by=None, silence_note="")
    return regression


def _change_live(regression: Regression, **changes: object) -> None:
    """Update the silence fields while the regression is live (not resolved), conditionally,
    so a silence never lands on a regression the watch resolved meanwhile."""
    with transaction.atomic():
        moved = (
            Regression.objects.filter(pk=regression.pk)
            .exclude(state=State.RESOLVED)
            .update(**changes)
        )
    if not moved:
        raise TransitionRefused("a resolved regression cannot be silenced or unsilenced")
    for name, value in changes.items():
        setattr(regression, name, value)


def _note(note: str, *, required: bool) -> str:
    note = (note or "").strip()
    if required and not note:
        raise ValidationError({"note": "say why (the note is shown to everyone)"})
    if len(note) > NOTE_MAX_LENGTH:
        raise ValidationError({"note": f"at most {NOTE_MAX_LENGTH} characters"})
    return note
