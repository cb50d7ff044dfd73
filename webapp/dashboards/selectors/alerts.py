"""Alerts: what is failing now and what got slower, per endpoint x vantage point x parameter
set (a *group*: the watch's series): the selectors the home page and the alerts page share.

They read the state the watch's last pass stored (webapp/watch/latest.py, one SeriesLatest row
per series, from the nightly rollups), never raw runs: runs that ended after the pass count
from the next one, and the data say as of which pass (`as_of`).

Failing: every run of the site's on the group's latest night failed or timed out (tester
faults left out); it has been failing since the first of the failing nights in a row.
Slower: the median of the group's latest measured night against the median of the nightly
medians of the seven nights before it, beyond a threshold (higher-is-better metrics dropping
by drop_pct, the others rising by rise_pct).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypedDict

from django.db.models import F, FloatField, Q, QuerySet, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.urls import reverse
from django.utils import timezone

from webapp.campaigns.metrics import METRICS, RUN_METRICS
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Run
from webapp.dashboards.selectors.parameter_sets import (
    ParameterSet,
    compare_url,
    higher_is_better,
)
from webapp.dashboards.selectors.tester_faults import TesterFaultRow, tester_faults
from webapp.watch.latest import WORST
from webapp.watch.models import SeriesLatest
from webapp.watch.selectors import LiveRegression, WatchAsOf, regressions_live, watch_as_of
from webapp.watch.series import SeriesId

# Metrics where "slower" means something (bytes moved is not speed), and those checked when
# none is chosen: the registry's RunMetric.speed and .alert_default.
SPEED_METRICS = [m.name for m in RUN_METRICS if m.speed]
DEFAULT_SLOWER_METRICS = [m.name for m in RUN_METRICS if m.alert_default]
DEFAULT_DAYS = 7
DEFAULT_DROP_PCT = 30.0
DEFAULT_RISE_PCT = 50.0
MIN_BASELINE_RUNS = 3
# "Got slower" is news for a month at most: a series last measured longer ago is not.
SLOWER_MAX_DAYS = 31
MAX_ROWS = 500  # per list: the page and the API say when there were more


class LinkedRegression(LiveRegression):
    url: str


class GroupRow(TypedDict):
    """A group: where (vantage point, endpoint) and how (a parameter set)."""

    vantage_point: str
    vantage_point_id: int
    endpoint: int
    endpoint_name: str
    site: int
    site_name: str
    protocol: str
    operation: str
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    address_family: str
    parameter_set: str  # its label
    compare_url: str
    # The watch's live regression of this series (availability for failing, the metric for
    # slower), if it has one: what home's Regressions list shows of it.
    regression: LinkedRegression | None


class FailingRow(GroupRow):
    """A group whose latest night failed: every run of the site's failed or timed out."""

    run: int | None  # the latest failed run of that night
    run_url: str
    status: str
    error_class: str
    error_message: str
    last_at: datetime  # when that run was created
    failing_since: datetime  # the start (00:00 UTC) of the first failing night in a row
    failures: int  # the failed runs of those nights
    last_good_at: datetime | None  # the start of the latest night with a succeeded run


class SlowerRow(GroupRow):
    """A group's metric whose latest measured night is slower than the nights before."""

    metric: str
    unit: str
    night: str  # ISO date
    latest: float
    baseline: float  # the median of the nightly medians of the 7 nights before
    baseline_runs: int
    change: float  # latest / baseline - 1
    factor: float  # how many times worse
    run: int | None  # the latest measured run of that night
    run_url: str


class AlertsData(TypedDict):
    days: int
    slower_days: int
    as_of: WatchAsOf  # the watch's pass the lists come from
    failing_total: int
    failing: list[FailingRow]
    slower_total: int
    slower: list[SlowerRow]
    # The tester's own faults, by vantage point: never in `failing` (docs/watch.md).
    tester_faults: list[TesterFaultRow]


def alerts_filters(query: dict[str, Any]) -> dict[str, Any]:
    """An AlertsForm's cleaned data as Run lookups."""
    lookups = {
        "site": "endpoint__site",
        "protocol": "endpoint__protocol",
        "endpoint": "endpoint",
        "vantage_point": "vantage_point",
        **{f: f for f in PARAMETER_SET_FIELDS},
    }
    return {
        lookup: query[name] for name, lookup in lookups.items() if query.get(name) not in (None, "")
    }


def alerts_data(
    *, query: dict[str, Any], now: datetime | None = None, limit: int = MAX_ROWS
) -> AlertsData:
    """The lists for an AlertsForm's cleaned data, as of the watch's last pass, the first
    `limit` rows of each (home shows a few) and their totals: seven queries."""
    now = now or timezone.now()
    days = query.get("days") or DEFAULT_DAYS
    filters = alerts_filters(query)
    limit = min(limit, MAX_ROWS)
    failing = _failing((now - timedelta(days=days)).date(), filters)
    faults = tester_faults(since=(now - timedelta(days=days)).date(), filters=filters)
    slower = _slower_query(
        since=(now - timedelta(days=min(days, SLOWER_MAX_DAYS))).date(),
        filters=filters,
        metrics=query.get("metric") or DEFAULT_SLOWER_METRICS,
        drop_pct=query.get("drop_pct") or DEFAULT_DROP_PCT,
        rise_pct=query.get("rise_pct") or DEFAULT_RISE_PCT,
    )
    failing_shown = [_failing_row(row) for row in failing[:limit]]
    slower_shown = [_slower_row(row, metric) for row, metric in slower[:limit]]
    _link_regressions(failing_shown, slower_shown)
    return {
        "days": days,
        "slower_days": min(days, SLOWER_MAX_DAYS),
        "as_of": watch_as_of(),
        "failing_total": len(failing),
        "failing": failing_shown,
        "slower_total": len(slower),
        "slower": slower_shown,
        "tester_faults": faults[:MAX_ROWS],
    }


def _link_regressions(failing: list[FailingRow], slower: list[SlowerRow]) -> None:
    """Each row's live regression, if the watch has one for its series: one query."""
    keys = {id(row): _key(row, "availability") for row in failing}
    keys.update({id(row): _key(row, row["metric"]) for row in slower})
    live = regressions_live(keys=list(keys.values()))
    for row in (*failing, *slower):
        found = live.get(keys[id(row)])
        if found is not None:
            url = reverse("dashboards:regression-detail", args=[found["id"]])
            row["regression"] = {**found, "url": url}


def _key(row: GroupRow, metric: str) -> str:
    series = SeriesId(
        row["endpoint"],
        row["vantage_point_id"],
        row["operation"],
        row["method"],
        row["pattern"],
        row["read_size"],
        row["fraction"],
        row["clients"],
        row["address_family"],
    )
    return series.key(metric)


def _series(filters: dict[str, Any]) -> QuerySet[SeriesLatest]:
    return SeriesLatest.objects.filter(**filters)


GROUP_VALUES = (
    *PARAMETER_SET_FIELDS,
    "vantage_point_id",
    "vantage_point__name",
    "endpoint",
    "endpoint__name",
    "endpoint__protocol",
    "endpoint__site",
    "endpoint__site__name",
)


def alerts_failing(*, since: date, filters: dict[str, Any]) -> list[FailingRow]:
    """Groups whose latest night (on or after `since`) failed, as of the last watch pass, the
    newest breakage first. One query over the failing series' rows."""
    return [_failing_row(row) for row in _failing(since, filters)]


def _failing(since: date, filters: dict[str, Any]) -> list[dict[str, Any]]:
    rows = (
        _series(filters)
        .filter(failing=True, site_night__gte=since)
        .values(*GROUP_VALUES, "failing_since", "failures", "last_good", "failed_run", "site_night")
        .order_by("-failing_since", "endpoint__name", "vantage_point__name", *PARAMETER_SET_FIELDS)
    )
    return list(rows)


def _night_start(night: date | None) -> datetime | None:
    return None if night is None else datetime.combine(night, time(), tzinfo=UTC)


def _group_row(row: dict[str, Any]) -> GroupRow:
    parameter_set = ParameterSet(**{f: row[f] for f in PARAMETER_SET_FIELDS})
    pair = {"endpoint": row["endpoint"], "vantage_point": row["vantage_point"]}
    return {
        "vantage_point": row["vantage_point"],
        "vantage_point_id": row["vantage_point_id"],
        "endpoint": row["endpoint"],
        "endpoint_name": row["endpoint_name"],
        "site": row["site"],
        "site_name": row["site_name"],
        "protocol": row["protocol"],
        "operation": parameter_set.operation,
        "method": parameter_set.method,
        "pattern": parameter_set.pattern,
        "read_size": parameter_set.read_size,
        "fraction": parameter_set.fraction,
        "clients": parameter_set.clients,
        "address_family": parameter_set.address_family,
        "parameter_set": parameter_set.label,
        "compare_url": compare_url(pair, row.get("metric", "throughput_mbps"), parameter_set),
        "regression": None,
    }


def _failing_row(row: dict[str, Any]) -> FailingRow:
    _rename(row)
    run = row["failed_run"] or {}
    since = _night_start(row["failing_since"])
    last_at = datetime.fromisoformat(run["created_at"]) if run.get("created_at") else since
    assert since is not None and last_at is not None  # a failing series has its night
    return {
        **_group_row(row),
        "run": run.get("id"),
        "run_url": reverse("campaigns:run-detail", args=[run["id"]]) if run.get("id") else "",
        "status": run.get("status") or Run.Status.FAILED,
        "error_class": run.get("error_class") or "",
        "error_message": run.get("error_message") or "",
        "last_at": last_at,
        "failing_since": since,
        "failures": row["failures"],
        "last_good_at": _night_start(row["last_good"]),
    }


def _rename(row: dict[str, Any]) -> None:
    row.update(
        vantage_point=row.pop("vantage_point__name"),
        endpoint_name=row.pop("endpoint__name"),
        protocol=row.pop("endpoint__protocol"),
        site=row.pop("endpoint__site"),
        site_name=row.pop("endpoint__site__name"),
    )


def alerts_slower(
    *,
    since: date,
    filters: dict[str, Any],
    metrics: list[str],
    drop_pct: float = DEFAULT_DROP_PCT,
    rise_pct: float = DEFAULT_RISE_PCT,
) -> list[SlowerRow]:
    """(group, metric) pairs whose latest measured night (on or after `since`) is slower than
    the median of the seven nights before by the thresholds, the worst first, as of the last
    watch pass. One query: the series' stored figures, compared in the database."""
    found = _slower_query(
        since=since, filters=filters, metrics=metrics, drop_pct=drop_pct, rise_pct=rise_pct
    )
    return [_slower_row(row, metric) for row, metric in found]


def _slower_query(
    *,
    since: date,
    filters: dict[str, Any],
    metrics: list[str],
    drop_pct: float,
    rise_pct: float,
) -> list[tuple[dict[str, Any], str]]:
    if not set(metrics) <= set(SPEED_METRICS) or not metrics:
        raise ValueError(f"metrics must be some of {SPEED_METRICS}")
    metrics = list(dict.fromkeys(metrics))  # ?metric=wall_s&metric=wall_s asks once
    factors = {
        m: 1 - drop_pct / 100 if higher_is_better(m) else 1 + rise_pct / 100 for m in metrics
    }
    figures = {
        f"{part}_{i}": Cast(KT(f"metrics__{m}__{part}"), FloatField())
        for i, m in enumerate(metrics)
        for part in ("latest", "baseline")
    }
    crossed = Q(pk__in=[])
    for i, m in enumerate(metrics):
        bound = F(f"baseline_{i}") * Value(factors[m])
        worse = {f"latest_{i}__lte" if higher_is_better(m) else f"latest_{i}__gte": bound}
        crossed |= Q(**{f"baseline_{i}__gt": 0}, **worse)
    # No metric of a series crosses its threshold unless its worst one does: the index on
    # worst_factor finds the few candidates, their figures decide.
    least = min(_times_worse(m, factors[m]) for m in metrics) * (1 - 1e-9)
    rows = (
        _series(filters)
        .filter(worst_factor__gte=least)
        .filter(measured_night__gte=since, baseline_runs__gte=MIN_BASELINE_RUNS)
        .annotate(**figures)
        .filter(crossed)
        .values(*GROUP_VALUES, "measured_night", "measured_run", "baseline_runs", *figures)
        .order_by()
    )
    return _slower(rows, metrics, factors)


def _slower(
    rows: Iterable[dict[str, Any]], metrics: list[str], factors: dict[str, float]
) -> list[tuple[dict[str, Any], str]]:
    """(row, metric) of each metric that crossed its threshold, the worst first."""
    found = [(row, m, f) for row in rows for m, f in _crossings(row, metrics, factors)]
    found.sort(key=lambda c: (-c[2], c[0]["endpoint_name"], c[0]["vantage_point"]))
    return [(row, metric) for row, metric, _ in found]


def _times_worse(metric: str, factor: float) -> float:
    """A threshold (latest against baseline x factor) as how many times worse it is."""
    if not higher_is_better(metric):
        return factor
    return 1 / factor if factor > 0 else WORST


def _crossings(
    row: dict[str, Any], metrics: list[str], factors: dict[str, float]
) -> list[tuple[str, float]]:
    """(metric, how many times worse) of each metric of the group beyond its threshold."""
    _rename(row)
    out = []
    for i, metric in enumerate(metrics):
        latest, baseline = row[f"latest_{i}"], row[f"baseline_{i}"]
        if latest is None or baseline is None or baseline <= 0:
            continue
        up = higher_is_better(metric)
        if (latest > baseline * factors[metric]) if up else (latest < baseline * factors[metric]):
            continue
        row[metric] = (latest, baseline)
        out.append((metric, _factor(metric, latest, baseline)))
    return out


def _factor(metric: str, latest: float, baseline: float) -> float:
    """How many times worse `latest` is than `baseline` (> 0)."""
    if higher_is_better(metric):
        return baseline / latest if latest > 0 else WORST
    return latest / baseline


def _slower_row(row: dict[str, Any], metric: str) -> SlowerRow:
    latest, baseline = row[metric]
    run = row["measured_run"]
    return {
        **_group_row({**row, "metric": metric}),
        "metric": metric,
        "unit": METRICS[metric].unit,
        "night": row["measured_night"].isoformat(),
        "latest": latest,
        "baseline": baseline,
        "baseline_runs": row["baseline_runs"],
        "change": latest / baseline - 1,
        "factor": _factor(metric, latest, baseline),
        "run": run,
        "run_url": reverse("campaigns:run-detail", args=[run]) if run else "",
    }
