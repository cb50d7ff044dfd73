"""A scheduled slot that launched nothing: the campaign's latest claimed slot recorded an error
(`ScheduledLaunch.error`: the launch was refused or raised) raises a tester-fault regression
naming the campaign, the slot and the error; it is resolved once a later slot launches, or
once the campaign no longer launches by schedule (paused, unscheduled, deleted)
(docs/watch.md#a-slot-that-launched-nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, Subquery

from webapp.campaigns.models import Campaign, ScheduledLaunch
from webapp.watch.episodes import tester_fault_open
from webapp.watch.models import Regression
from webapp.watch.states import regression_set_state

State = Regression.State
TARGET = "campaign"


def launch_key(campaign_id: int) -> str:
    return f"campaign:{campaign_id}:launch"


def campaign_launches_failed(*, now: datetime) -> list[Regression]:
    """Open (tester-fault), update or resolve each scheduled campaign's launch regression as
    of `now` (two queries and the changes); returns those changed."""
    latest = ScheduledLaunch.objects.filter(campaign=OuterRef("pk")).order_by("-slot", "-id")
    running = (
        Campaign.objects.exclude(schedule="")
        .filter(schedule_paused_at__isnull=True)
        .annotate(
            slot=Subquery(latest.values("slot")[:1]),
            error=Subquery(latest.values("error")[:1]),
            run_count=Subquery(latest.values("run_count")[:1]),
        )
        .filter(slot__isnull=False)
        .values("pk", "name", "slot", "error", "run_count")
    )
    launches = {row["pk"]: row for row in running}
    live = {
        r.key: r
        for r in Regression.objects.filter(
            key__startswith="campaign:", key__endswith=":launch", state__in=Regression.LIVE
        )
    }
    changed = []
    for campaign_id, launch in launches.items():
        regression = live.pop(launch_key(campaign_id), None)
        if launch["error"]:
            changed += _failed(regression, launch, now)
        elif regression is not None:
            changed.append(_resolved(regression, now, _launched_note(launch)))
    for regression in live.values():
        note = "the campaign no longer launches by schedule (paused, unscheduled or deleted)"
        changed.append(_resolved(regression, now, note))
    return changed


def _failed(
    regression: Regression | None, launch: Mapping[str, Any], now: datetime
) -> list[Regression]:
    summary = (
        f"campaign {launch['name']}: the slot {launch['slot']:%Y-%m-%d %H:%M} UTC launched "
        f"nothing: {launch['error']}"
    )
    blame = {
        "target": TARGET,
        "rule": "launch-failed",
        "campaign": launch["name"],
        "campaign_id": launch["pk"],
        "slot": launch["slot"].isoformat(),
        "error": launch["error"],
    }
    slot = launch["slot"].isoformat()
    detector: dict[str, Any] = {
        "name": "launch-failed",
        "parameters": {},
        # The slot whose launch failed: a moment, not a span of nights.
        "baseline_window": None,
        "target_window": [slot, slot],
    }
    if regression is None:
        key = launch_key(launch["pk"])
        return [tester_fault_open(key=key, summary=summary, blame=blame, detector=detector, at=now)]
    if regression.blame.get("slot") != blame["slot"]:
        # A later slot failed too (perhaps otherwise): the regression names the latest.
        Regression.objects.filter(pk=regression.pk).update(
            summary=summary, blame=blame, detector=detector
        )
    return []


def _launched_note(launch: Mapping[str, Any]) -> str:
    return f"the slot {launch['slot']:%Y-%m-%d %H:%M} UTC launched {launch['run_count']} runs"


def _resolved(regression: Regression, now: datetime, note: str) -> Regression:
    regression_set_state(regression=regression, state=State.RESOLVED, at=now, note=note)
    return regression
