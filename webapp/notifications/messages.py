"""What a delivery says: one regression's state change, or one day's digest, in plain text
(emails, Slack's and Mattermost's `{"text": ...}`) and as the generic JSON body."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from django.conf import settings

from webapp.notifications.channels import Message
from webapp.watch.models import Regression, RegressionEvent

State = Regression.State

# The state changes a subscriber is told about; acknowledging, pending and no-data are not.
NOTIFIED_STATES = frozenset({State.OPEN, State.RECOVERING, State.RESOLVED, State.TESTER_FAULT})


def event_kind(event: RegressionEvent) -> str | None:
    """What the change is called in messages (None: not notified): opened (new, or back
    after no data), confirmed (pending -> open), reopened (recovering or acknowledged -> open),
    recovering, resolved, tester-fault."""
    if event.state not in NOTIFIED_STATES:
        return None
    if event.state != State.OPEN:
        return str(event.state)
    if event.previous_state == State.PENDING:
        return "confirmed"
    if event.previous_state in (State.RECOVERING, State.ACKNOWLEDGED):
        return "reopened"
    return "opened"


def regression_link(regression_id: int) -> str:
    return f"{settings.FEDPROBE_BASE_URL}/regressions/{regression_id}/"


def event_message(*, event: RegressionEvent, kind: str, key: str) -> Message:
    regression = event.regression
    link = regression_link(regression.pk)
    headline = f"[fedprobe] {kind}: {regression.severity} {_first_line(regression.summary)}"
    blame = regression.blame or {}
    lines = [
        headline,
        "",
        regression.summary,
        "",
        f"State: {event.previous_state or 'new'} -> {event.state} at {event.at.isoformat()}",
        f"Severity: {regression.severity}; metric: {regression.metric}",
        f"Blamed on: {blame.get('target', '-')} ({blame.get('rule', '-')})",
        f"Details: {link}",
    ]
    body: dict[str, object] = {
        "event": kind,
        "regression_id": regression.pk,
        "state": event.state,
        "previous_state": event.previous_state,
        "summary": regression.summary,
        "severity": regression.severity,
        "metric": regression.metric,
        "blame": blame,
        "link": link,
        "at": event.at.isoformat(),
        "delivery_id": key,
    }
    return Message(subject=headline, text="\n".join(lines), body=body)


@dataclass(frozen=True)
class Digest:
    """One subscriber's day: what opened, resolved, is still open, and the tester's faults."""

    day: date
    opened: Sequence[Regression]
    resolved: Sequence[Regression]
    still_open: Sequence[Regression]
    tester_faults: Sequence[Regression]


def digest_message(*, digest: Digest, key: str) -> Message:
    sections = (
        ("opened", digest.opened),
        ("resolved", digest.resolved),
        ("still_open", digest.still_open),
        ("tester_faults", digest.tester_faults),
    )
    counts = ", ".join(f"{len(rows)} {name.replace('_', ' ')}" for name, rows in sections)
    subject = f"[fedprobe] digest of {digest.day.isoformat()}: {counts}"
    lines = [subject]
    for name, rows in sections:
        lines += ["", f"{name.replace('_', ' ').capitalize()} ({len(rows)}):"]
        lines += [
            f"- {_first_line(r.summary)} ({r.severity}) {regression_link(r.pk)}" for r in rows
        ]
    body: dict[str, object] = {
        "event": "digest",
        "day": digest.day.isoformat(),
        **{name: [_item(r) for r in rows] for name, rows in sections},
        "link": f"{settings.FEDPROBE_BASE_URL}/regressions/",
        "delivery_id": key,
    }
    return Message(subject=subject, text="\n".join(lines), body=body)


def _item(regression: Regression) -> dict[str, object]:
    return {
        "regression_id": regression.pk,
        "state": regression.state,
        "summary": regression.summary,
        "severity": regression.severity,
        "link": regression_link(regression.pk),
    }


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 120 else line[:119] + "…"
