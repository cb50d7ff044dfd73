"""The home page: what needs the operator (open regressions, severity first, and the
tester's own faults, from the watch's stored state), what is failing now, what got slower,
what is running; with links."""

from __future__ import annotations

from typing import TypedDict

from django.db.models import QuerySet

from webapp.campaigns.health import VantagePointHealth, vantage_points_health
from webapp.campaigns.models import Run
from webapp.campaigns.selectors import RunProgress, run_list, runs_progress
from webapp.sites.models import VantagePoint
from webapp.watch.models import Regression
from webapp.watch.selectors import regression_needing_attention, regression_tester_faults

TOP = 5  # rows of each list on the home page; the alerts page has them all
RUNNING_ROWS = 20
QUEUED_ROWS = 10


def home_regressions() -> HomeRegressions:
    """Open regressions (open, acknowledged, recovering; not silenced; a blamed group's
    members under their group), severity first, and tester faults: TOP of each, counted."""
    open_rows, open_count = regression_needing_attention(limit=TOP)
    faults, faults_count = regression_tester_faults(limit=TOP)
    return {
        "open": open_rows,
        "open_count": open_count,
        "tester_faults": faults,
        "tester_faults_count": faults_count,
    }


def home_worker_health() -> list[tuple[VantagePoint, VantagePointHealth]]:
    """Each vantage point with whether a worker listens on its queue (no broker call)."""
    vantage_points = list(VantagePoint.objects.order_by("name"))
    health = vantage_points_health(vantage_points=vantage_points)
    return [(vantage_point, health[vantage_point.pk]) for vantage_point in vantage_points]


def home_active_runs() -> ActiveRuns:
    """The running runs first, then the queue in the order workers take it (oldest first),
    each list cut short with its count, so a large launch never hides what is running."""
    running_runs = run_list().filter(status=Run.Status.RUNNING)
    queued_runs = run_list().filter(status=Run.Status.QUEUED).order_by("created_at", "id")
    running = list(running_runs[:RUNNING_ROWS])
    queued = list(queued_runs[:QUEUED_ROWS])
    running_count = _count(running_runs, running, RUNNING_ROWS)
    queued_count = _count(queued_runs, queued, QUEUED_ROWS)
    shown = running + queued
    progress = {p.id: p for p in runs_progress(run_ids=[run.pk for run in shown])}
    return {
        "running": [(run, progress.get(run.pk)) for run in shown],
        "running_count": running_count,
        "running_more": running_count - len(running),
        "queued_count": queued_count,
        "queued_more": queued_count - len(queued),
        "running_total": running_count + queued_count,
    }


def _count(runs: QuerySet[Run], shown: list[Run], limit: int) -> int:
    return len(shown) if len(shown) < limit else int(runs.count())


class ActiveRuns(TypedDict):
    """The home page's "Running and queued"."""

    running: list[tuple[Run, RunProgress | None]]
    running_count: int
    running_more: int
    queued_count: int
    queued_more: int
    running_total: int


class HomeRegressions(TypedDict):
    """The home page's "Regressions"."""

    open: list[Regression]
    open_count: int
    tester_faults: list[Regression]
    tester_faults_count: int
