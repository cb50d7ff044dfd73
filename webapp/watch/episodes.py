"""One regression's episode moved along by the nights: what a night says about a series (or a
blamed group) is a `Finding`, and `regression_advance` applies it with hysteresis, through
states.regression_set_state (docs/watch.md#states).

- nothing live and a bad night: a new regression, `open` when the finding is confirmed
  (a breakage of availability, a confirmed shift), else `pending`; nothing opens during a
  downtime (`may_open` False);
- pending: confirmed -> open; a good night -> resolved (a single bad night does not alert);
- open, acknowledged: a good night -> recovering;
- recovering: FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS good nights in a row -> resolved; a bad
  night -> open again;
- no-data, tester-fault: the series is measured again: bad -> open (pending), good -> resolved;
  a tester fault given a `group` is its member (not told on its own), unless it was open
  (told) before.
A night at or before the regression's `last_night` is not applied twice: a pass is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from webapp.watch.models import Regression, RegressionEvent
from webapp.watch.states import regression_set_state

State = Regression.State
# A group a series' regression is a member of: the group's regression, and the blame the
# member says (a vantage point's not-run regression, for its series' tester faults).
MemberOf = tuple[Regression, dict[str, Any]]
# States of a regression its subscribers were told of: it is told to the end on its own.
TOLD = (State.OPEN, State.ACKNOWLEDGED, State.RECOVERING)


@dataclass(frozen=True)
class Finding:
    """What one night says about one regression key: bad or good (None: nothing to say,
    as with too few nights), and, if bad, what a regression about it is."""

    key: str
    metric: str
    bad: bool | None
    confirmed: bool = False
    tier: str = Regression.Tier.BREAKAGE
    verdict: str = Regression.Verdict.NO_CHANGE
    severity: str = Regression.Severity.WARNING
    summary: str = ""
    subject: dict[str, Any] = field(default_factory=dict)  # site, endpoint, ... for a new one
    detector: dict[str, Any] = field(default_factory=dict)
    blame: dict[str, Any] = field(default_factory=dict)
    versions: list[dict[str, str]] = field(default_factory=list)
    change_night: date | None = None
    baseline: float | None = None
    current: float | None = None
    change_pct: float | None = None
    tester_fault: bool = False  # tonight's failures were all the tester's own


def resolve_after_nights() -> int:
    return int(settings.FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS)


def regression_open(
    *, finding: Finding, state: str, night: date, at: datetime, parent: Regression | None = None
) -> Regression:
    """A new regression from `finding`, in `state`, with its opening event (no previous
    state), in one transaction."""
    with transaction.atomic():
        regression = Regression.objects.create(
            key=finding.key,
            metric=finding.metric,
            state=state,
            opened_at=at,
            last_night=night,
            parent=parent,
            **_described(finding),
            **finding.subject,
        )
        RegressionEvent.objects.create(
            regression=regression, state=state, previous_state="", at=at, note=finding.summary
        )
    return regression


def tester_fault_open(
    *,
    key: str,
    summary: str,
    blame: dict[str, Any],
    detector: dict[str, Any],
    at: datetime,
    **subject: Any,
) -> Regression:
    """A critical tester-fault regression on the tester's side of things (a vantage point that
    took no work, a slot that launched nothing): never against a site, opened at once."""
    finding = Finding(
        key=key,
        metric="availability",
        bad=None,
        tester_fault=True,
        tier=Regression.Tier.BREAKAGE,
        verdict=Regression.Verdict.REGRESSION,
        severity=Regression.Severity.CRITICAL,
        summary=summary,
        subject=subject,
        blame=blame,
        detector=detector,
    )
    return regression_open(
        finding=finding, state=Regression.State.TESTER_FAULT, night=at.date(), at=at
    )


def _described(finding: Finding) -> dict[str, Any]:
    """The fields a finding sets on its regression (at opening, and while it is bad)."""
    described: dict[str, Any] = {
        "tier": finding.tier,
        "verdict": finding.verdict,
        "severity": finding.severity,
        "summary": finding.summary,
        "detector": finding.detector,
        "change_night": finding.change_night,
        "baseline": finding.baseline,
        "current": finding.current,
        "change_pct": finding.change_pct,
    }
    if finding.versions:
        described["versions"] = finding.versions
    if finding.blame:
        # A series' own findings blame nothing: the group that claimed it keeps its word.
        described["blame"] = finding.blame
    return described


def regression_advance(
    *,
    regression: Regression | None,
    finding: Finding,
    night: date,
    at: datetime,
    may_open: bool = True,
    group: MemberOf | None = None,
) -> Regression | None:
    """Apply `night`'s finding to the live regression of its key (None: there is none).
    Returns the regression (a new one, or `regression`), None when nothing is live. `group`
    (a parent regression and the member's blame) is where a tester fault belongs: it is made
    a member before its state changes, so it is never told on its own."""
    if regression is None:
        if not finding.bad or not may_open:
            if finding.tester_fault and may_open:
                if group is not None:
                    finding = replace(finding, blame=group[1])
                return regression_open(
                    finding=finding,
                    state=State.TESTER_FAULT,
                    night=night,
                    at=at,
                    parent=None if group is None else group[0],
                )
            return None
        state = State.OPEN if finding.confirmed else State.PENDING
        return regression_open(finding=finding, state=state, night=night, at=at)
    if night <= regression.last_night:
        return regression
    target, good_nights = _next(regression, finding, may_open)
    if target == State.TESTER_FAULT and group is not None and regression.state not in TOLD:
        _member_make(regression, *group)
    note = _note(regression, at)
    if target != regression.state:
        regression_set_state(regression=regression, state=target, at=at, note=note)
    changes: dict[str, Any] = {"last_night": night, "good_nights": good_nights}
    if finding.bad and finding.summary and target not in (State.NO_DATA, State.TESTER_FAULT):
        changes |= _described(finding)
    elif finding.current is not None:
        changes["current"] = finding.current
    Regression.objects.filter(pk=regression.pk).update(**changes)
    for name, value in changes.items():
        setattr(regression, name, value)
    return regression


def _member_make(regression: Regression, parent: Regression, blame: dict[str, Any]) -> None:
    if regression.parent_id != parent.pk:
        Regression.objects.filter(pk=regression.pk).update(parent=parent, blame=blame)
        regression.parent, regression.blame = parent, blame


def _note(regression: Regression, at: datetime) -> str:
    """Marks a change made while silenced: notifications leave it out."""
    if regression.silenced_until and regression.silenced_until > at:
        return f"silenced until {regression.silenced_until.isoformat()}"
    return ""


def _next(regression: Regression, finding: Finding, may_open: bool) -> tuple[str, int]:
    """The state `finding` moves the regression to, and its good nights in a row after it."""
    state, good = regression.state, regression.good_nights
    if finding.tester_fault:
        return State.TESTER_FAULT, 0
    if finding.bad is None:
        return state, good
    if finding.bad:
        if not may_open and state in (State.PENDING, State.RECOVERING, State.NO_DATA):
            return state, 0
        if state == State.PENDING:
            return (State.OPEN if finding.confirmed else State.PENDING), 0
        if state == State.RECOVERING:
            return State.OPEN, 0  # it was confirmed: bad again is open again
        if state in (State.NO_DATA, State.TESTER_FAULT):
            return (State.OPEN if finding.confirmed else State.PENDING), 0
        return state, 0
    if state in (State.PENDING, State.NO_DATA, State.TESTER_FAULT):
        return State.RESOLVED, good + 1
    if state in (State.OPEN, State.ACKNOWLEDGED):
        good = 1
        return (State.RESOLVED if good >= resolve_after_nights() else State.RECOVERING), good
    good += 1
    return (State.RESOLVED if good >= resolve_after_nights() else State.RECOVERING), good


def regression_no_data(*, regression: Regression, night: date, at: datetime) -> bool:
    """Move a live regression whose series stopped being measured to no-data (once)."""
    if regression.state in (State.NO_DATA, State.RESOLVED) or night <= regression.last_night:
        return False
    regression_set_state(
        regression=regression,
        state=State.NO_DATA,
        at=at,
        note="the series has not been measured lately",
    )
    Regression.objects.filter(pk=regression.pk).update(last_night=night)
    regression.last_night = night
    return True
