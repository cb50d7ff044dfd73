"""Scheduled but not run: a vantage point whose runs wait in its queue while no worker of it
is alive raises a tester-fault regression naming it and the command that starts its worker;
it is resolved once runs flow again (docs/watch.md#scheduled-but-not-run)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Min

from webapp.campaigns.health import vantage_points_health
from webapp.campaigns.models import Run
from webapp.sites.models import VantagePoint
from webapp.watch.episodes import tester_fault_open
from webapp.watch.models import Regression
from webapp.watch.states import regression_set_state

State = Regression.State


def not_run_key(vantage_point: VantagePoint) -> str:
    return f"vp:{vantage_point.name}:not-run"


def vantage_points_not_running(*, now: datetime) -> list[Regression]:
    """Open (tester-fault) or resolve each vantage point's not-run regression as of `now`;
    returns those changed."""
    waiting_since = now - timedelta(seconds=settings.FEDPROBE_WATCH_NOT_RUN_AFTER_S)
    stale = {
        row["vantage_point"]: row
        for row in Run.objects.filter(status=Run.Status.QUEUED, created_at__lte=waiting_since)
        .order_by()
        .values("vantage_point")
        .annotate(queued=Count("id"), oldest=Min("created_at"))
    }
    live = {
        r.key: r
        for r in Regression.objects.filter(key__endswith=":not-run", state__in=Regression.LIVE)
    }
    points = VantagePoint.objects.filter(pk__in=stale) if stale or live else []
    health = vantage_points_health(vantage_points=points, now=now) if stale else {}
    changed = []
    for point in points:
        key = not_run_key(point)
        stuck = point.pk in stale and not health[point.pk].listening
        if stuck and key not in live:
            waiting = stale[point.pk]
            command = health[point.pk].worker_command
            changed.append(_open(point, waiting["queued"], waiting["oldest"], command, now))
    for key, regression in live.items():
        name = key.removeprefix("vp:").removesuffix(":not-run")
        point_id = regression.vantage_point_id
        flowing = point_id not in stale or health[point_id].listening
        if flowing:
            regression_set_state(
                regression=regression, state=State.RESOLVED, at=now, note=f"{name} runs again"
            )
            changed.append(regression)
    return changed


def _open(
    point: VantagePoint, queued: int, oldest: datetime, command: str, now: datetime
) -> Regression:
    summary = (
        f"vantage point {point.name} took no work: {queued} runs queued since "
        f"{oldest:%Y-%m-%d %H:%M} UTC and no live worker; start one on its host: "
        f"{command}"
    )
    blame = {
        "target": Regression.Blame.VANTAGE_POINT,
        "rule": "not-run",
        "queued_runs": queued,
        "command": command,
    }
    detector: dict[str, Any] = {
        "name": "not-run",
        "parameters": {"not_run_after_s": settings.FEDPROBE_WATCH_NOT_RUN_AFTER_S},
        # The runs waited from the oldest one's creation to this pass.
        "baseline_window": None,
        "target_window": [oldest.isoformat(), now.isoformat()],
    }
    return tester_fault_open(
        key=not_run_key(point),
        summary=summary,
        blame=blame,
        detector=detector,
        at=now,
        vantage_point=point,
    )
