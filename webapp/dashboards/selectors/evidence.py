"""Evidence for a site ticket: what one run, or one regression's series around its change,
shows a site's admin (docs/evidence.md). The page and the archive read the same `Evidence`.

A run's evidence is its series (endpoint, vantage point, parameter set) over the nights
around it; a regression's, its series over the nights its detail page shows. Both add the
same test from the other vantage points in the comparison window (the run's night, or the
regression's target window), which answers "the site or the path?".

Bounded: at most MAX_RUNS runs of the series, MAX_FAILING failing runs with at most
MAX_CLIENTS client records each, MAX_OTHER_RUNS runs of the other vantage points; the
totals are counted so the README says what was left out.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import BooleanField, ExpressionWrapper, Prefetch, QuerySet
from django.db.models.fields.json import KT

from webapp.campaigns.filters import with_first_error
from webapp.campaigns.models import (
    PARAMETER_SET_FIELDS,
    ClientAttempt,
    Run,
    q_not_tester_fault,
    q_tester_fault,
)
from webapp.campaigns.run_table import without_secrets
from webapp.sites.models import Endpoint, VantagePoint
from webapp.watch.models import Regression, SeriesNight
from webapp.watch.selectors import (
    metric_unit,
    night_metric,
    regression_night_range,
    regressions_joined,
)

MAX_RUNS = 200  # runs of the series listed (newest first)
MAX_FAILING = 20  # failing runs whose errors and client records are included
MAX_CLIENTS = 32  # client records per failing run
MAX_OTHER_RUNS = 200  # runs of the other vantage points in the comparison window
RUN_NIGHTS_BEFORE = 14  # nights of a run's series shown before its own night
RUN_WINDOW = timedelta(hours=12)  # a run's comparison window: this either side of it


class NoEvidence(Exception):
    """A regression about a group of series (a vantage point, a protocol, a credential):
    no one endpoint and test to show; each member has its own evidence."""


@dataclass(frozen=True)
class VantageOutcome:
    """How one vantage point did with the test in the comparison window."""

    name: str
    runs: int
    failed: int  # failed, timed out or partial: the site's, tester faults left out
    tester_faults: int
    error_classes: dict[str, int]
    latest_error: str  # the newest failure's "class: message", without secrets

    @property
    def all_failed(self) -> bool:
        return self.runs > 0 and self.failed == self.runs

    @property
    def none_failed(self) -> bool:
        return self.runs > 0 and self.failed == 0


@dataclass(frozen=True)
class Evidence:
    """Everything the page and the archive show about one run or one regression."""

    kind: str  # "run" or "regression"
    pk: int
    what_is_wrong: str
    endpoint: Endpoint
    vantage_point: VantagePoint
    parameter_set: dict[str, Any]
    run: Run | None  # the run the versions and the commands are taken from
    regression: Regression | None
    metric: str
    unit: str
    nights: tuple[date, date]
    change_night: date | None
    series_nights: list[SeriesNight]  # every vantage point's, by vantage point then night
    compare_window: tuple[datetime, datetime]
    runs: list[Run]  # the series' runs over the nights, newest first (with_first_error)
    runs_total: int
    failing: list[Run]  # the series' failing runs, newest first, attempts prefetched
    failing_total: int
    other_runs: list[Run]  # the other vantage points' runs in the comparison window
    other_runs_total: int
    outcomes: list[VantageOutcome]  # this vantage point first, then the others by name
    site_or_path: str
    server_versions: list[str] = field(default_factory=list)
    client_versions: list[str] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return f"{self.kind}-{self.pk}"

    @property
    def own_outcome(self) -> VantageOutcome:
        return self.outcomes[0]


def run_evidence(*, run: Run) -> Evidence:
    """The evidence of one run: its series over RUN_NIGHTS_BEFORE nights before its night
    up to the night after, and the other vantage points within RUN_WINDOW of it."""
    night = run.created_at.astimezone(UTC).date()
    nights = (night - timedelta(days=RUN_NIGHTS_BEFORE), night + timedelta(days=1))
    window = (run.created_at - RUN_WINDOW, run.created_at + RUN_WINDOW)
    metric = "throughput_mbps" if run.status in Run.Status.MEASURED else "availability"
    return _evidence(
        kind="run",
        pk=run.pk,
        what_is_wrong=run_sentence(run),
        endpoint=run.endpoint,
        vantage_point=run.vantage_point,
        parameter_set={f: getattr(run, f) for f in PARAMETER_SET_FIELDS},
        focus=run,
        regression=None,
        metric=metric,
        nights=nights,
        change_night=None,
        compare_window=window,
    )


def regression_evidence(*, regression: Regression) -> Evidence:
    """The evidence of a regression of one series: its nights as its detail shows them, the
    other vantage points over its target window (else from its change night on). Raises
    NoEvidence for a regression about a group of series."""
    if regression.endpoint is None or regression.vantage_point is None or not regression.method:
        raise NoEvidence(
            "this regression is about a group of series, not one endpoint and test: "
            "each of its members has its own evidence"
        )
    nights = regression_night_range(regression=regression)
    window = _target_window(regression, nights)
    parameter_set = {f: getattr(regression, f) for f in PARAMETER_SET_FIELDS}
    series = _series_runs(regression.endpoint, regression.vantage_point, parameter_set)
    focus = _focus_run(series, window)
    return _evidence(
        kind="regression",
        pk=regression.pk,
        what_is_wrong=regression.summary.strip(),
        endpoint=regression.endpoint,
        vantage_point=regression.vantage_point,
        parameter_set=parameter_set,
        focus=focus,
        regression=regression,
        metric=regression.metric,
        nights=nights,
        change_night=regression.change_night,
        compare_window=window,
    )


def run_sentence(run: Run) -> str:
    """What a run says, in one sentence: what failed and why, or what it measured."""
    what = (
        f"Reading {run.test_file.url} ({run.endpoint.protocol}) from fedprobe's vantage point "
        f"{run.vantage_point.name}"
    )
    when = f"on {run.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    first = run.errors[0] if run.errors else None
    if isinstance(first, dict) and run.status != Run.Status.SUCCEEDED:
        message = _first_line(without_secrets(str(first.get("message") or "")))
        said = f"{what} {run.status} {when}: {first.get('class')}: {message}".rstrip(": .")
        if run.is_tester_fault:
            return f"{said}; this is fedprobe's own fault, not the site's: no ticket is needed."
        return f"{said}."
    if run.throughput_mbps is not None:
        return f"{what} {run.status} {when} at {run.throughput_mbps:.2f} MB/s."
    return f"{what} is {run.status} ({when})."


def _evidence(
    *,
    kind: str,
    pk: int,
    what_is_wrong: str,
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    parameter_set: dict[str, Any],
    focus: Run | None,
    regression: Regression | None,
    metric: str,
    nights: tuple[date, date],
    change_night: date | None,
    compare_window: tuple[datetime, datetime],
) -> Evidence:
    first, last = nights
    test = Run.objects.filter(endpoint=endpoint, **parameter_set)
    series = test.filter(vantage_point=vantage_point)
    over_nights = series.filter(
        created_at__gte=_midnight(first), created_at__lt=_midnight(last + timedelta(days=1))
    )
    failing = over_nights.filter(q_not_tester_fault(), status__in=Run.Status.WITH_FAILURES)
    in_window = test.filter(created_at__gte=compare_window[0], created_at__lt=compare_window[1])
    others = in_window.exclude(vantage_point=vantage_point)
    newest = over_nights.select_related("vantage_point").order_by("-created_at", "-id")
    runs = list(with_first_error(newest)[:MAX_RUNS])
    other_runs = list(
        with_first_error(others.select_related("vantage_point").order_by("-created_at"))[
            :MAX_OTHER_RUNS
        ]
    )
    outcomes = _outcomes(in_window, vantage_point)
    series_nights = _series_nights(endpoint, parameter_set, nights)
    changes = _changes(series_nights, metric, change_night, compare_window)
    return Evidence(
        kind=kind,
        pk=pk,
        what_is_wrong=what_is_wrong,
        endpoint=endpoint,
        vantage_point=vantage_point,
        parameter_set=parameter_set,
        run=focus,
        regression=regression,
        metric=metric,
        unit=metric_unit(metric),
        nights=nights,
        change_night=change_night,
        series_nights=series_nights,
        compare_window=compare_window,
        runs=runs,
        runs_total=_total(over_nights, runs, MAX_RUNS),
        failing=_failing(failing),
        failing_total=failing.count(),
        other_runs=other_runs,
        other_runs_total=_total(others, other_runs, MAX_OTHER_RUNS),
        outcomes=outcomes,
        site_or_path=site_or_path(outcomes, metric=metric, changes=changes),
        server_versions=_distinct(run.server_version for run in runs),
        client_versions=_distinct(run.client_version for run in runs),
    )


def site_or_path(
    outcomes: list[VantageOutcome],
    *,
    metric: str = "",
    changes: dict[str, float | None] | None = None,
) -> str:
    """One sentence: did the other vantage points fail the same test in the same window (or,
    without failures, see the same change of `metric`)? `outcomes`: this vantage point's
    first; `changes`: each vantage point's change of the metric, in percent."""
    own, others = outcomes[0], [o for o in outcomes[1:] if o.runs]
    own_change = (changes or {}).get(own.name)
    if not own.failed and own_change is not None:
        return _change_sentence(own.name, metric, own_change, changes or {})
    if not own.failed and (not others or all(o.none_failed for o in others)):
        return (
            f"No run of this test failed from {own.name} in the comparison window"
            + (" nor from the other vantage points" if others else "")
            + ": nothing points at the site or the path for a failure."
        )
    if not others:
        return (
            "No other vantage point ran this test in the comparison window, so the data "
            "cannot tell the site from the path: run the commands below from another network."
        )
    failed = [o.name for o in others if o.failed]
    fine = [o.name for o in others if not o.failed]
    if not fine:
        return (
            f"The other vantage points ({', '.join(failed)}) failed the same test in the same "
            "window too: the trouble is at the site (the endpoint), not on one network path."
        )
    if not failed:
        return (
            f"The other vantage points ({', '.join(fine)}) ran the same test in the same window "
            f"without failing: the trouble is on the path from {own.name} (its network or "
            "its side), not at the site."
        )
    return (
        f"Some other vantage points failed the same test in the same window ({', '.join(failed)}) "
        f"and some did not ({', '.join(fine)}): the site fails some of the paths, or several "
        "paths are in trouble."
    )


def _change_sentence(
    own: str, metric: str, own_change: float, changes: dict[str, float | None]
) -> str:
    """The same change elsewhere (the same way, at least half as large): the site's; none
    elsewhere: the path's."""
    others = {name: c for name, c in changes.items() if name != own and c is not None}
    if not others:
        return (
            "No other vantage point measured this test before and after the change, so the "
            "data cannot tell the site from the path: run the commands below from another "
            "network."
        )
    same = sorted(n for n, c in others.items() if _alike(c, own_change))
    not_same = sorted(set(others) - set(same))
    words = ", ".join(f"{n} {others[n]:+.0f}%" for n in sorted(others))
    if not not_same:
        return (
            f"The other vantage points saw {metric} change the same way in the same window "
            f"({words}; {own} {own_change:+.0f}%): the change is at the site (the endpoint), "
            "not on one network path."
        )
    if not same:
        return (
            f"The other vantage points saw no such change of {metric} in the same window "
            f"({words}; {own} {own_change:+.0f}%): the change is on the path from {own} (its "
            "network or its side), not at the site."
        )
    return (
        f"Some other vantage points saw {metric} change the same way ({', '.join(same)}) and "
        f"some did not ({', '.join(not_same)}; {words}): the site changed for some paths, or "
        "several paths did."
    )


def _alike(change: float, own_change: float) -> bool:
    return change * own_change > 0 and abs(change) >= abs(own_change) / 2


def _changes(
    nights: list[SeriesNight],
    metric: str,
    change_night: date | None,
    window: tuple[datetime, datetime],
) -> dict[str, float | None]:
    """Per vantage point, the change of `metric` in percent: the median of its nights in the
    comparison window against the median of its nights before the change (None: too few,
    or a failure metric, which the runs' outcomes answer)."""
    if change_night is None or metric == "availability" or metric.startswith("error:"):
        return {}
    first, last = window[0].date(), window[1].date()
    before: dict[str, list[float]] = {}
    after: dict[str, list[float]] = {}
    for night in nights:
        value = night_metric(metric, night)[0]
        if value is None:
            continue
        name = night.vantage_point.name
        if night.night < change_night:
            before.setdefault(name, []).append(value)
        elif first <= night.night < last:
            after.setdefault(name, []).append(value)
    changes: dict[str, float | None] = {}
    for name in before.keys() | after.keys():
        baseline = statistics.median(before[name]) if before.get(name) else None
        current = statistics.median(after[name]) if after.get(name) else None
        changes[name] = (
            (current - baseline) / baseline * 100 if baseline and current is not None else None
        )
    return changes


def _outcomes(runs: QuerySet[Run], own: VantagePoint) -> list[VantageOutcome]:
    rows = (
        runs.filter(status__in=Run.Status.ENDED)
        .annotate(
            error_class=KT("errors__0__class"),
            error_message=KT("errors__0__message"),
            tester_fault=ExpressionWrapper(q_tester_fault(), output_field=BooleanField()),
        )
        .values("vantage_point__name", "status", "error_class", "error_message", "tester_fault")
    )
    by_name: dict[str, list[dict[str, Any]]] = {own.name: []}
    for row in rows.order_by("-created_at"):
        by_name.setdefault(row["vantage_point__name"], []).append(dict(row))
    names = [own.name, *sorted(n for n in by_name if n != own.name)]
    return [_outcome(name, by_name[name]) for name in names]


def _outcome(name: str, rows: list[dict[str, Any]]) -> VantageOutcome:
    ours = [r for r in rows if r["tester_fault"]]
    failed = [
        r for r in rows if r["status"] in Run.Status.WITH_FAILURES and r not in ours
    ]  # newest first
    latest = failed[0] if failed else None
    return VantageOutcome(
        name=name,
        runs=len(rows) - len(ours),
        failed=len(failed),
        tester_faults=len(ours),
        error_classes=dict(Counter(str(r["error_class"] or "unknown") for r in failed)),
        latest_error=_error_line(latest) if latest else "",
    )


def _error_line(row: dict[str, Any]) -> str:
    message = _first_line(without_secrets(row["error_message"] or ""))
    return f"{row['error_class']}: {message}"


def _failing(runs: QuerySet[Run]) -> list[Run]:
    attempts = ClientAttempt.objects.order_by("client")
    newest = runs.order_by("-created_at", "-id").prefetch_related(
        Prefetch("attempts", queryset=attempts)
    )
    return list(newest.select_related("vantage_point")[:MAX_FAILING])


def _series_nights(
    endpoint: Endpoint, parameter_set: dict[str, Any], nights: tuple[date, date]
) -> list[SeriesNight]:
    rows = SeriesNight.objects.filter(endpoint=endpoint, night__range=nights, **parameter_set)
    return list(rows.select_related("vantage_point").order_by("vantage_point__name", "night"))


def _series_runs(
    endpoint: Endpoint, vantage_point: VantagePoint, parameter_set: dict[str, Any]
) -> QuerySet[Run]:
    return Run.objects.filter(endpoint=endpoint, vantage_point=vantage_point, **parameter_set)


def _focus_run(series: QuerySet[Run], window: tuple[datetime, datetime]) -> Run | None:
    """The run whose versions and parameters a regression's evidence shows: the newest
    failing one of its window, else the newest ended one of its window, else the newest."""
    ended = series.filter(status__in=Run.Status.ENDED).select_related(
        "endpoint", "vantage_point", "test_file", "campaign"
    )
    newest = ended.order_by("-created_at", "-id")
    in_window = newest.filter(created_at__gte=window[0], created_at__lt=window[1])
    failing = in_window.filter(q_not_tester_fault(), status__in=Run.Status.WITH_FAILURES)
    return failing.first() or in_window.first() or newest.first()


def _target_window(regression: Regression, nights: tuple[date, date]) -> tuple[datetime, datetime]:
    target = (regression.detector or {}).get("target_window")
    start: date | None = None
    end: date | None = None
    if isinstance(target, list | tuple) and len(target) == 2:
        try:
            start, end = (date.fromisoformat(str(v)[:10]) for v in target)
        except ValueError:
            start = end = None
    start = start or regression.change_night or nights[0]
    end = end or regression.last_night
    return _midnight(start), _midnight(end + timedelta(days=1))


def night_value(metric: str, night: SeriesNight) -> float | None:
    """The night's value of `metric` as the regression pages plot it."""
    return night_metric(metric, night)[0]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _total(rows: QuerySet[Run], shown: list[Run], limit: int) -> int:
    return len(shown) if len(shown) < limit else int(rows.count())


def _distinct(values: Any) -> list[str]:
    return sorted({str(v) for v in values if v})


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def run_evidence_get(*, pk: int) -> Evidence:
    """The evidence of run `pk` (Run.DoesNotExist if none)."""
    run = Run.objects.select_related(
        "campaign", "endpoint__site", "vantage_point", "test_file__endpoint"
    ).get(pk=pk)
    return run_evidence(run=run)


def regression_evidence_get(*, pk: int) -> Evidence:
    """The evidence of regression `pk` (Regression.DoesNotExist if none; NoEvidence for a
    group's)."""
    return regression_evidence(regression=regressions_joined().get(pk=pk))
