"""A site's summary: per endpoint (one per protocol, as a site usually has) the latest key
figures, availability per day and per week, the failure rate against the week before, and
the recent failures: the selector the site page and its API view share.

Availability is SAM style: the share of a day's (or week's) ended runs that succeeded, from
every vantage point. A partial run (some clients failed) counts as half a success; cancelled
runs are left out (a cancel is an operator's act, not the site's), as are runs still queued
or running. The failure rate is one minus the availability, over the last 7 days against the
7 before them. Days and weeks are UTC, weeks start on Monday, and a run counts on the day it
was created (the slot a schedule launched it for).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta
from typing import Any, TypedDict

from django.db.models import Count, OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone

from webapp.campaigns.filters import with_first_error
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Run, q_not_tester_fault
from webapp.campaigns.run_table import RunError
from webapp.dashboards.selectors.compare import bucket_start, midnight, parameter_sets_measured
from webapp.dashboards.selectors.parameter_sets import (
    ParameterSet,
    ParameterSetJSON,
    compare_url,
    matrix_url,
    parameter_set_json,
)
from webapp.sites.models import Endpoint, Site

DAYS = 14
WEEKS = 8
TREND_DAYS = 7
RECENT_FAILURES = 20
# The strip's colours: at least GOOD is good, under BAD is bad (WLCG's availability targets
# are 95-97%); the cells say the percentage too.
AVAILABILITY_GOOD = 0.95
AVAILABILITY_BAD = 0.80
# A failure rate that moved by less than this (1 percentage point) is steady.
TREND_STEADY = 0.01


class Cell(TypedDict):
    """One day or week of one endpoint (or of the whole site)."""

    start: str  # the day, or the week's Monday (ISO date)
    succeeded: int
    partial: int
    failed: int  # failed or timed out
    runs: int  # ended runs, cancelled left out
    availability: float | None  # None: no ended runs
    rating: str  # good, warn, bad or none


class FailureRate(TypedDict):
    last: float | None  # the last TREND_DAYS days
    before: float | None  # the TREND_DAYS before them
    trend: str  # worse, better, steady, or "" when either has no runs


class KeyFigures(TypedDict):
    run: int
    run_url: str
    at: datetime
    vantage_point: str
    throughput_mbps: float | None
    open_s: float | None
    ttfb_s: float | None
    wall_s: float | None


class EndpointSummary(TypedDict):
    id: int
    name: str
    protocol: str
    role: str
    enabled: bool
    url: str
    latest: KeyFigures | None  # its latest succeeded run of the summary's parameter set
    days: list[Cell]
    weeks: list[Cell]
    failure_rate: FailureRate
    compare_url: str
    matrix_url: str


class Failure(TypedDict):
    run: int
    run_url: str
    at: datetime
    status: str
    endpoint: int
    endpoint_name: str
    protocol: str
    vantage_point: str
    error_class: str
    message: str  # the first error's first line, redacted


class SiteSummary(TypedDict):
    site: int
    site_name: str
    today: date
    parameter_set: ParameterSetJSON | None  # of the key figures: the most measured lately
    endpoints: list[EndpointSummary]
    site_days: list[Cell]
    site_weeks: list[Cell]
    failure_rate: FailureRate
    recent_failures: list[Failure]
    compare_url: str
    matrix_url: str


def site_summary(*, site: Site, now: datetime | None = None) -> SiteSummary:
    """The summary of `site` as of `now`: five queries whatever the site's history (its
    endpoints; the parameter sets of its window; each endpoint's latest succeeded run of the
    most measured one, by index probes; ended runs per endpoint, day and status; the
    newest failures), each reading at most the last WEEKS weeks except the probes."""
    today = (now or timezone.now()).date()
    days = [today - timedelta(days=n) for n in range(DAYS - 1, -1, -1)]
    this_monday = today - timedelta(days=today.weekday())
    weeks = [this_monday - timedelta(weeks=n) for n in range(WEEKS - 1, -1, -1)]
    since = midnight(min(weeks[0], days[0]))
    endpoints = list(site.endpoints.order_by("protocol", "name"))
    ids = [e.pk for e in endpoints]
    runs = Run.objects.filter(endpoint_id__in=ids, created_at__gte=since).order_by()
    measured = parameter_sets_measured(runs) if ids else []
    parameter_set = (
        ParameterSet(**{f: measured[0][f] for f in PARAMETER_SET_FIELDS}) if measured else None
    )
    latest = _latest_succeeded(ids, parameter_set)
    counts = _counts_per_day(runs)
    summaries = [
        _endpoint_summary(
            e,
            latest=latest.get(e.pk),
            counts=counts[e.pk],
            days=days,
            weeks=weeks,
            parameter_set=parameter_set,
        )
        for e in endpoints
    ]
    site_counts = _pooled(counts.values())
    return {
        "site": site.pk,
        "site_name": site.name,
        "today": today,
        "parameter_set": parameter_set_json(parameter_set),
        "endpoints": summaries,
        "site_days": [_cell(d, site_counts, [d]) for d in days],
        "site_weeks": [_cell(w, site_counts, _week(w)) for w in weeks],
        "failure_rate": _failure_rate(site_counts, today),
        "recent_failures": _recent_failures(runs),
        "compare_url": compare_url({"site": site.pk}, "throughput_mbps", parameter_set),
        "matrix_url": matrix_url({"site": site.pk}, parameter_set),
    }


def _latest_succeeded(ids: list[int], parameter_set: ParameterSet | None) -> dict[int, Run]:
    """Per endpoint, its latest succeeded run of the parameter set: one query, a probe of
    run_compare_idx (endpoint, parameter set, status, created_at) per endpoint."""
    if parameter_set is None or not ids:
        return {}
    newest = Run.objects.filter(
        endpoint_id=OuterRef("pk"), status=Run.Status.SUCCEEDED, **parameter_set.query()
    ).order_by("-created_at", "-id")
    probes = Endpoint.objects.filter(pk__in=ids).annotate(run=Subquery(newest.values("pk")[:1]))
    runs = (
        Run.objects.filter(pk__in=probes.values("run"))
        .select_related("vantage_point")
        .only(
            "endpoint_id",
            "created_at",
            "vantage_point__name",
            "throughput_mbps",
            "open_s",
            "ttfb_s",
            "wall_s",
        )
    )
    return {run.endpoint_id: run for run in runs}


# (endpoint id, day) -> status -> runs
DayCounts = dict[date, dict[str, int]]


def _counts_per_day(runs: Any) -> defaultdict[int, DayCounts]:
    """Ended runs (cancelled and tester faults left out) per endpoint, UTC day and status:
    one query."""
    rows = (
        runs.filter(q_not_tester_fault(), status__in=Run.Status.ENDED)
        .annotate(day=bucket_start("created_at", "day"))
        .values("endpoint_id", "day", "status")
        .annotate(n=Count("*"))
        .order_by()
    )
    counts: defaultdict[int, DayCounts] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        counts[row["endpoint_id"]][row["day"]][row["status"]] = row["n"]
    return counts


def _pooled(per_endpoint: Any) -> DayCounts:
    pooled: DayCounts = defaultdict(lambda: defaultdict(int))
    for counts in per_endpoint:
        for day, statuses in counts.items():
            for status, n in statuses.items():
                pooled[day][status] += n
    return pooled


def _week(monday: date) -> list[date]:
    return [monday + timedelta(days=n) for n in range(7)]


def _cell(start: date, counts: DayCounts, days: list[date]) -> Cell:
    totals: dict[str, int] = defaultdict(int)
    for day in days:
        for status, n in counts.get(day, {}).items():
            totals[status] += n
    succeeded, partial = totals[Run.Status.SUCCEEDED], totals[Run.Status.PARTIAL]
    failed = totals[Run.Status.FAILED] + totals[Run.Status.TIMEOUT]
    runs = succeeded + partial + failed
    availability = (succeeded + partial / 2) / runs if runs else None
    return {
        "start": start.isoformat(),
        "succeeded": succeeded,
        "partial": partial,
        "failed": failed,
        "runs": runs,
        "availability": availability,
        "rating": availability_rating(availability),
    }


def availability_rating(availability: float | None) -> str:
    if availability is None:
        return "none"
    if availability >= AVAILABILITY_GOOD:
        return "good"
    return "warn" if availability >= AVAILABILITY_BAD else "bad"


def _failure_rate(counts: DayCounts, today: date) -> FailureRate:
    last_start = today - timedelta(days=TREND_DAYS - 1)
    last = _cell(last_start, counts, [last_start + timedelta(days=n) for n in range(TREND_DAYS)])
    before_start = last_start - timedelta(days=TREND_DAYS)
    before = _cell(
        before_start, counts, [before_start + timedelta(days=n) for n in range(TREND_DAYS)]
    )
    rate_last = None if last["availability"] is None else 1 - last["availability"]
    rate_before = None if before["availability"] is None else 1 - before["availability"]
    return {"last": rate_last, "before": rate_before, "trend": _trend(rate_last, rate_before)}


def _trend(last: float | None, before: float | None) -> str:
    if last is None or before is None:
        return ""
    if abs(last - before) < TREND_STEADY:
        return "steady"
    return "worse" if last > before else "better"


def _endpoint_summary(
    endpoint: Endpoint,
    *,
    latest: Run | None,
    counts: DayCounts,
    days: list[date],
    weeks: list[date],
    parameter_set: ParameterSet | None,
) -> EndpointSummary:
    return {
        "id": endpoint.pk,
        "name": endpoint.name,
        "protocol": endpoint.protocol,
        "role": endpoint.role,
        "enabled": endpoint.enabled,
        "url": reverse("sites:endpoint-detail", args=[endpoint.pk]),
        "latest": _key_figures(latest) if latest else None,
        "days": [_cell(d, counts, [d]) for d in days],
        "weeks": [_cell(w, counts, _week(w)) for w in weeks],
        "failure_rate": _failure_rate(counts, days[-1]),
        "compare_url": compare_url({"endpoint": endpoint.pk}, "throughput_mbps", parameter_set),
        "matrix_url": matrix_url(
            {"site": endpoint.site_id, "protocol": endpoint.protocol}, parameter_set
        ),
    }


def _key_figures(run: Run) -> KeyFigures:
    return {
        "run": run.pk,
        "run_url": reverse("campaigns:run-detail", args=[run.pk]),
        "at": run.created_at,
        "vantage_point": run.vantage_point.name,
        "throughput_mbps": run.throughput_mbps,
        "open_s": run.open_s,
        "ttfb_s": run.ttfb_s,
        "wall_s": run.wall_s,
    }


def _recent_failures(runs: Any) -> list[Failure]:
    """The newest RECENT_FAILURES runs of the window that failed, timed out or were partial
    by the endpoint's fault (tester faults left out), with their first error: one query."""
    failed = (
        with_first_error(runs.filter(q_not_tester_fault(), status__in=Run.Status.WITH_FAILURES))
        .select_related("endpoint", "vantage_point")
        .only(
            "status",
            "created_at",
            "endpoint__name",
            "endpoint__protocol",
            "vantage_point__name",
        )
        .order_by("-created_at", "-id")[:RECENT_FAILURES]
    )
    return [_failure(run) for run in failed]


def _failure(run: Run) -> Failure:
    error = RunError.of(run)
    return {
        "run": run.pk,
        "run_url": reverse("campaigns:run-detail", args=[run.pk]),
        "at": run.created_at,
        "status": run.status,
        "endpoint": run.endpoint_id,
        "endpoint_name": run.endpoint.name,
        "protocol": run.endpoint.protocol,
        "vantage_point": run.vantage_point.name,
        "error_class": error.error_class if error else "",
        "message": error.first_line if error else "",
    }
