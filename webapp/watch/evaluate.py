"""The watch's pass (`watch_evaluate`): roll up the nights whose runs ended since the last
pass, evaluate each series measured on the latest of them, blame groups, and move the
regressions along (docs/watch.md).

For each series (endpoint x vantage point x parameter set) measured on the evaluated night,
its last FEDPROBE_WATCH_LOOKBACK_NIGHTS rollup rows are read once; availability is judged by
rule (functional failures go straight to an open regression), each error class by its share
against its own band (error_series), each watched metric by detect.detect over the nights'
medians; series that stopped being measured go to no-data (nodata). Nights in an outage of
the endpoint (its own or its site's) are not evaluated; during any downtime nothing opens.
Then, on every pass whatever the nights, the tester's own trouble: vantage points that take
no work (notrun), slots that launched nothing (launches), and credentials of scheduled
campaigns that expire or cannot be refreshed (credentials).
A pass run twice for the same `now` changes nothing: the runs' watermark finds no new
night, and a regression is never advanced twice by one night.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max
from django.utils import timezone

from webapp.campaigns.metrics import METRICS
from webapp.core import sql
from webapp.sites.models import Downtime, Endpoint
from webapp.watch import blame, credentials, launches, notrun
from webapp.watch.detect import Detection, DetectorConfig, NightPoint, detect
from webapp.watch.episodes import Finding, MemberOf, regression_advance
from webapp.watch.error_series import error_findings
from webapp.watch.latest import (
    series_latest_backfilled,
    series_latest_refresh,
    series_tester_faults_refresh,
)
from webapp.watch.models import Regression, RegressionEvent, SeriesNight, WatchPass
from webapp.watch.nodata import series_no_data
from webapp.watch.rollups import night_bounds, rollups_refresh
from webapp.watch.series import (
    NightRow,
    SeriesId,
    series_nights_read,
    vantage_point_nights,
)
from webapp.watch.versions import version_change, versions_summary

State = Regression.State
# Failures that say the service itself is broken for us: an availability alert the same night.
FUNCTIONAL_CLASSES = frozenset({"auth", "tls", "not-found", "checksum", "refused", "timeout"})
# The advisory lock that keeps two passes from running at once ("watch" in ASCII).
PASS_LOCK = 0x7761746368


@dataclass
class PassOutcome:
    """What one pass did: the nights rolled up and evaluated, and the state changes."""

    nights: list[date] = field(default_factory=list)
    evaluated: list[date] = field(default_factory=list)
    series: int = 0
    changes: list[str] = field(default_factory=list)
    skipped: bool = False  # another pass was running
    backfilled: list[date] = field(default_factory=list)  # older nights rolled up
    backfill_before: date | None = None  # the nights before it are still to be rolled up
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step of the pass

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.perf_counter() - began


@dataclass(frozen=True)
class Night:
    """What the pass knows for one evaluated night: downtimes and each series' verdict."""

    night: date
    outage: frozenset[int]  # endpoints in an outage that night: not evaluated
    downtime: frozenset[int]  # endpoints in any downtime that night: nothing opens


def watch_evaluate(*, now: datetime) -> PassOutcome:
    """One pass of the watch as of `now` (idempotent). While another pass runs (beat's and
    one by hand), it does nothing and says so (`skipped`)."""
    with _only_pass() as alone:
        if not alone:
            return PassOutcome(skipped=True)
        return _pass(now)


@contextmanager
def _only_pass() -> Iterator[bool]:
    """Hold PostgreSQL's advisory lock of the watch for the pass, if no one else holds it
    (SQLite, the one-machine default, serialises its writers by itself)."""
    if not sql.is_postgresql():
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [PASS_LOCK])
        alone = bool(cursor.fetchone()[0])
    try:
        yield alone
    finally:
        if alone:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [PASS_LOCK])


def _pass(now: datetime) -> PassOutcome:
    started = timezone.now()
    outcome = PassOutcome()
    # The steps in the order they are told (the tester's step is timed in two parts).
    outcome.phases = dict.fromkeys(("rollup", "latest", "evaluation", "tester"), 0.0)
    with outcome.timed("rollup"):
        refreshed = rollups_refresh(now=now)
    outcome.nights = refreshed.nights
    outcome.backfilled = refreshed.backfilled
    outcome.backfill_before = refreshed.backfill_before
    with outcome.timed("latest"):
        series_latest_refresh(nights=refreshed.nights)
        if refreshed.backfilled:  # older nights: longer streaks, tester faults of a longer range
            series_latest_backfilled(backfilled=refreshed.backfilled)
            series_tester_faults_refresh(nights=refreshed.backfilled)
    events_before = _event_count()
    with outcome.timed("tester"):
        # First: the tester faults of a vantage point that stopped are its regression's members.
        not_running = notrun.vantage_points_not_running(now=now)
    with outcome.timed("evaluation"):
        for night in _nights_to_evaluate(refreshed.nights, first_pass=refreshed.first_pass):
            outcome.evaluated.append(night)
            outcome.series += _evaluate_night(night, now, not_running)
    with outcome.timed("tester"):
        notrun.members_attach(not_running)
        launches.campaign_launches_failed(now=now)
        credentials.credentials_expiring_alert(now=now)
    outcome.changes = _changes_since(events_before)
    WatchPass.objects.create(
        now=now,
        started_at=started,
        finished_at=timezone.now(),
        nights=[n.isoformat() for n in sorted({*refreshed.backfilled, *refreshed.nights})],
        evaluated=[n.isoformat() for n in outcome.evaluated],
        series_nights=refreshed.rows,
        series=outcome.series,
        changes=len(outcome.changes),
        watermark=refreshed.watermark,
        backfill_before=refreshed.backfill_before,
    )
    return outcome


def _event_count() -> int:
    return RegressionEvent.objects.aggregate(last=Max("id"))["last"] or 0


def _changes_since(last_id: int) -> list[str]:
    events = RegressionEvent.objects.filter(id__gt=last_id).select_related("regression")
    return [
        f"{event.regression.key}: {event.previous_state or 'new'} -> {event.state}"
        for event in events.order_by("id")
    ]


def _nights_to_evaluate(nights: Sequence[date], *, first_pass: bool) -> list[date]:
    """The changed nights within FEDPROBE_WATCH_CATCHUP_NIGHTS of the latest, in order: a
    pass after a few missed ones replays them; the first pass over a history evaluates its
    last night only (from the nights before it)."""
    if not nights:
        return []
    if first_pass:
        return [nights[-1]]
    first = nights[-1] - timedelta(days=settings.FEDPROBE_WATCH_CATCHUP_NIGHTS - 1)
    return [night for night in nights if night >= first]


def _evaluate_night(night: date, now: datetime, not_running: dict[int, Regression]) -> int:
    """Evaluate every series measured on `night`, FEDPROBE_WATCH_ENDPOINTS_PER_READ
    endpoints' series at a time (their lookback window read at once); returns how many. The
    tester faults of a vantage point in `not_running` are members of its regression."""
    context = _night_context(night)
    live = _live_regressions()
    sites = dict(Endpoint.objects.values_list("id", "site_id"))
    first = night - timedelta(days=settings.FEDPROBE_WATCH_LOOKBACK_NIGHTS - 1)
    measuring = vantage_point_nights(first=first, last=night)
    verdicts: list[blame.SeriesVerdict] = []
    for endpoints in _endpoint_chunks(night, live):
        rows = series_nights_read(first=first, last=night, endpoints=endpoints)
        for series, history in rows.items():
            if history[-1].night != night or series.endpoint_id in context.outage:
                continue
            may_open = series.endpoint_id not in context.downtime
            subject = series.subject | {"site_id": sites[series.endpoint_id]}
            stopped = not_running.get(series.vantage_point_id)
            verdicts.append(
                _evaluate_series(
                    series,
                    history,
                    live=live,
                    now=now,
                    may_open=may_open,
                    subject=subject,
                    group=None if stopped is None else (stopped, notrun.member_blame(stopped)),
                )
            )
    blame.groups_blame(night=night, verdicts=verdicts, live=live, at=now)
    series_no_data(night=night, now=now, live=live, measuring=measuring, downtime=context.downtime)
    return len(verdicts)


def _endpoint_chunks(night: date, live: dict[str, Regression]) -> Iterator[list[int]]:
    """The endpoints measured on `night`, and those of live series regressions (which may
    have no data), in chunks."""
    measured = set(
        SeriesNight.objects.filter(night=night).values_list("endpoint_id", flat=True).distinct()
    )
    measured |= {r.endpoint_id for r in live.values() if r.endpoint_id is not None}
    ordered = sorted(measured)
    size = settings.FEDPROBE_WATCH_ENDPOINTS_PER_READ
    for start in range(0, len(ordered), size):
        yield ordered[start : start + size]


def _night_context(night: date) -> Night:
    start, end = night_bounds(night)
    covering = Downtime.objects.filter(start__lt=end, end__gt=start)
    outage = _endpoints_covered(covering.filter(severity=Downtime.Severity.OUTAGE))
    return Night(night=night, outage=outage, downtime=_endpoints_covered(covering))


def _endpoints_covered(downtimes: Iterable[Downtime]) -> frozenset[int]:
    """The endpoints the downtimes cover: their own, and all of their sites'."""
    endpoints = {d.endpoint_id for d in downtimes if d.endpoint_id is not None}
    sites = {d.site_id for d in downtimes if d.site_id is not None}
    if sites:
        endpoints |= set(Endpoint.objects.filter(site__in=sites).values_list("id", flat=True))
    return frozenset(endpoints)


def _live_regressions() -> dict[str, Regression]:
    return {r.key: r for r in Regression.objects.filter(state__in=Regression.LIVE)}


def _evaluate_series(
    series: SeriesId,
    history: list[NightRow],
    *,
    live: dict[str, Regression],
    now: datetime,
    may_open: bool,
    subject: dict[str, object],
    group: MemberOf | None = None,
) -> blame.SeriesVerdict:
    tonight = history[-1]
    availability = availability_finding(series, tonight, subject=subject)
    _advance(availability, live, tonight.night, now, may_open, group=group)
    for found in error_findings(
        series, history, availability=availability, live=live, subject=subject
    ):
        _advance(found, live, tonight.night, now, may_open, group=group)
    for metric in settings.FEDPROBE_WATCH_METRICS:
        live_one = live.get(series.key(metric))
        finding = metric_finding(series, history, metric, live_one, subject=subject)
        if finding is not None:
            _advance(finding, live, tonight.night, now, may_open)
    return blame.SeriesVerdict(
        series_key=series.key("availability"),
        endpoint_id=series.endpoint_id,
        vantage_point_id=series.vantage_point_id,
        bad=bool(availability.bad),
        all_failed=availability.severity == Regression.Severity.CRITICAL,
        in_downtime=not may_open,
    )


def _advance(
    finding: Finding,
    live: dict[str, Regression],
    night: date,
    now: datetime,
    may_open: bool,
    *,
    group: MemberOf | None = None,
) -> None:
    current = live.get(finding.key)
    if current is not None and finding.bad and current.blame.get("rule") == notrun.RULE:
        # The site's fault now, no longer the stopped vantage point's: told on its own.
        notrun.member_detach(current)
    regression = regression_advance(
        regression=current,
        finding=finding,
        night=night,
        at=now,
        may_open=may_open,
        group=group,
    )
    if regression is None or regression.state == State.RESOLVED:
        live.pop(finding.key, None)
    else:
        live[finding.key] = regression


def availability_finding(
    series: SeriesId, tonight: NightRow, *, subject: dict[str, object]
) -> Finding:
    """Availability by rule: all of a night's runs ended by the tester's fault is a tester
    fault; a functional failure, or every run failing, is a breakage at once (critical when
    nothing succeeded); other failures of some runs are suspicious (pending)."""
    key = series.key("availability")
    site_runs = tonight.runs - tonight.tester_faults
    if site_runs == 0:
        summary = (
            f"all {tonight.runs} runs of {tonight.night} ended by the tester's own fault: "
            "not counted against the site"
        )
        return Finding(
            key, "availability", None, tester_fault=True, subject=subject, summary=summary
        )
    measured = tonight.succeeded + tonight.partial
    if not tonight.failed:
        return Finding(key, "availability", False, current=measured / site_runs, subject=subject)
    functional = sorted(set(tonight.errors) & FUNCTIONAL_CLASSES)
    all_failed = measured == 0
    classes = ", ".join(f"{c}: {n}" for c, n in sorted(tonight.errors.items()))
    return Finding(
        key,
        "availability",
        True,
        confirmed=bool(functional) or all_failed,
        tier=Regression.Tier.BREAKAGE,
        verdict=Regression.Verdict.REGRESSION if functional else Regression.Verdict.SUSPICIOUS,
        severity=Regression.Severity.CRITICAL if all_failed else Regression.Severity.WARNING,
        summary=f"{tonight.failed} of {site_runs} runs failed on {tonight.night} ({classes})",
        subject=subject,
        detector={
            "name": "failures",
            "parameters": {"functional": sorted(FUNCTIONAL_CLASSES)},
            # Judged on the night's runs alone: no baseline.
            "baseline_window": None,
            "target_window": [tonight.night.isoformat(), tonight.night.isoformat()],
        },
        change_night=tonight.night,
        current=measured / site_runs,
    )


def metric_finding(
    series: SeriesId,
    history: list[NightRow],
    metric: str,
    live: Regression | None,
    *,
    subject: dict[str, object],
) -> Finding | None:
    """Tonight's finding on one metric: detect() over the nights' medians; a live regression
    is good again once tonight is back within FEDPROBE_WATCH_RECOVERED_PCT of its baseline.
    None when tonight measured nothing of it."""
    points = [
        NightPoint(row.night, *figures)
        for row in history
        if (figures := row.metrics.get(metric)) is not None
    ]
    if not points or points[-1].night != history[-1].night:
        return None
    higher_is_better = METRICS[metric].higher_is_better
    found = detect(points, higher_is_better=higher_is_better, config=DetectorConfig())
    key = series.key(metric)
    tonight = points[-1].value
    if live is not None and live.baseline:
        # A live regression is judged against its own baseline: the detector keeps seeing
        # the old change point for weeks after the series came back.
        worse_pct = _worse_pct(live.baseline, tonight, higher_is_better)
        if worse_pct < float(settings.FEDPROBE_WATCH_RECOVERED_PCT):
            return Finding(key, metric, False, current=tonight)
        if found.tier is None or not found.worse:
            return Finding(key, metric, True, current=tonight)  # still bad, nothing new
    if found.tier is None or not found.worse:
        return Finding(key, metric, None if live is None else False, current=tonight)
    return _metric_regression(history, metric, found, key, subject)


def _worse_pct(baseline: float, value: float, higher_is_better: bool) -> float:
    change = (value - baseline) / baseline * 100
    return -change if higher_is_better else change


def _metric_regression(
    history: list[NightRow], metric: str, found: Detection, key: str, subject: dict[str, object]
) -> Finding:
    shift = found.tier == Regression.Tier.SHIFT
    versions = version_change(history, found.change_night or history[-1].night)
    summary = (
        f"{metric} {'shifted' if shift else 'far outside its recent band'}: "
        f"{_figure(found.baseline)} -> {_figure(found.current)} ({found.change_pct or 0:+.0f}%)"
        f" since {found.change_night}"
    )
    if versions:
        summary += f"; {versions_summary(versions)}"
    severity = Regression.Severity.WARNING if shift else Regression.Severity.INFO
    return Finding(
        key,
        metric,
        True,
        confirmed=shift and found.confirmed,
        tier=found.tier or Regression.Tier.BREAKAGE,
        verdict=found.verdict,
        severity=severity,
        summary=summary,
        subject=subject,
        detector=found.detector,
        versions=versions,
        change_night=found.change_night,
        baseline=found.baseline,
        current=found.current,
        change_pct=found.change_pct,
    )


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
