"""Compare over time: one metric of chosen endpoints, per day (or week), for one parameter set.

The page (/compare/) and its API view (/api/v1/compare/) call `compare_data` with the same
validated query (forms.CompareForm), so the chart's numbers are the API's.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypedDict

from django.db import connection
from django.db.models import Case, Count, DateField, F, Q, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Trunc

from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import (
    PARAMETER_SET_FIELDS,
    Run,
    parameter_set_named,
    q_tester_fault,
)
from webapp.campaigns.selectors import Percentile, percentile
from webapp.core import sql
from webapp.sites.models import Endpoint, VantagePoint

BUCKETS = ("day", "week")
MAX_ENDPOINTS = 20
MAX_DAYS = 731
DEFAULT_DAYS = 90
# Individual runs go to the chart only for short ranges: a year of them is noise, and heavy.
RUNS_MAX_DAYS = 31
RUNS_MAX = 5000


class EndpointJSON(TypedDict):
    id: int
    name: str
    protocol: str
    role: str
    site: int
    site_name: str


class BucketColumns(TypedDict):
    """One endpoint's buckets as columns: the bucket's first day, n, q1, median, q3."""

    t: list[str]
    n: list[int]
    q1: list[float | None]
    median: list[float | None]
    q3: list[float | None]


class SeriesJSON(BucketColumns):
    endpoint: int


class FailureJSON(TypedDict):
    """Runs that measured nothing, of one endpoint, day, status and first error class, and
    whether they are the tester's faults (marked apart: never the endpoint's failures)."""

    endpoint: int
    day: str
    status: str
    error_class: str
    tester_fault: bool
    n: int


class RunPointJSON(TypedDict):
    """One measured run, as the chart's dot."""

    id: int
    endpoint: int
    t: str
    value: float | None
    status: str
    vantage_point: str
    server_version: str | None


class CompareData(TypedDict):
    """What the compare page draws and its API answers."""

    metric: str
    unit: str
    label: str
    bucket: str
    since: date
    until: date
    vantage_point: str | None
    server_version: str | None
    parameter_set: dict[str, Any] | None  # None: these endpoints measured nothing
    parameter_sets: list[dict[str, Any]]  # the measured ones, with their runs
    endpoints: list[EndpointJSON]
    series: list[SeriesJSON]  # per endpoint (that measured), columns of its buckets
    failures: list[FailureJSON]
    runs: list[RunPointJSON]
    runs_shown: bool
    runs_max_days: int
    runs_truncated: bool


def default_range(today: date) -> tuple[date, date]:
    return today - timedelta(days=DEFAULT_DAYS - 1), today


def compare_data(
    *,
    endpoints: Sequence[Endpoint],
    metric: str,
    since: date,
    until: date,
    bucket: str = "day",
    parameters: dict[str, Any] | None = None,
    vantage_point: VantagePoint | None = None,
    server_version: str | None = None,
) -> CompareData:
    """The metric per endpoint and bucket (median, quartiles, count) of the measured runs of
    one parameter set, the failures per day, and, for ranges up to RUNS_MAX_DAYS, the runs.

    The parameter set is the one `parameters` names in full; else the most measured one of
    these endpoints that agrees with the fields given (so a line never mixes parameter
    sets), counted over the range's last RUNS_MAX_DAYS days (the whole range if they
    measured nothing then); None (and no data) if they measured nothing at all."""
    runs = _runs_in_range(endpoints, since, until, vantage_point)
    if server_version:
        runs = runs.filter(server_version__icontains=server_version)
    recent = max(since, until - timedelta(days=RUNS_MAX_DAYS - 1))
    measured = parameter_sets_measured(runs.filter(created_at__gte=midnight(recent)))
    if not measured and recent > since:
        measured = parameter_sets_measured(runs)
    chosen = _choose(parameters or {}, measured)
    data: CompareData = {
        "metric": metric,
        "unit": METRICS[metric].unit,
        "label": METRICS[metric].label,
        "bucket": bucket,
        "since": since,
        "until": until,
        "vantage_point": vantage_point.name if vantage_point else None,
        "server_version": server_version,
        "parameter_set": chosen,
        "parameter_sets": measured,
        "endpoints": [_endpoint_json(e) for e in endpoints],
        "series": [],
        "failures": [],
        "runs": [],
        "runs_shown": (until - since).days + 1 <= RUNS_MAX_DAYS,
        "runs_max_days": RUNS_MAX_DAYS,
        "runs_truncated": False,
    }
    if chosen is None:
        return data
    runs = runs.filter(**chosen)
    data["series"] = _series(runs, endpoints, metric, bucket)
    data["failures"] = _failures(runs)
    if data["runs_shown"]:
        data["runs"], data["runs_truncated"] = _runs(runs, metric)
    return data


def _runs_in_range(
    endpoints: Sequence[Endpoint], since: date, until: date, vantage_point: VantagePoint | None
) -> QuerySet[Run]:
    runs = Run.objects.filter(
        endpoint_id__in=[e.pk for e in endpoints],
        created_at__gte=midnight(since),
        created_at__lt=midnight(until + timedelta(days=1)),
    )
    if vantage_point:
        runs = runs.filter(vantage_point_id=vantage_point.pk)
    return runs.order_by()


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def bucket_start(field: str, bucket: str) -> Cast:
    """The bucket's first day (weeks start on Monday), as a date: UTC days."""
    return Cast(Trunc(field, bucket, tzinfo=UTC), output_field=DateField())


def parameter_sets_measured(runs: QuerySet[Run]) -> list[dict[str, Any]]:
    """The parameter sets among `runs` with how many runs each, the most measured first."""
    rows = runs.values(*PARAMETER_SET_FIELDS).annotate(runs=Count("*"))
    return sorted(rows, key=lambda r: (-r["runs"], *(r[f] for f in PARAMETER_SET_FIELDS)))


def _choose(given: dict[str, Any], measured: list[dict[str, Any]]) -> dict[str, Any] | None:
    full = parameter_set_named(given)
    if full is not None:
        return full
    named = {f: given[f] for f in PARAMETER_SET_FIELDS if given.get(f) not in (None, "")}
    for candidate in measured:
        if all(candidate[f] == value for f, value in named.items()):
            return {f: candidate[f] for f in PARAMETER_SET_FIELDS}
    return None


def _endpoint_json(endpoint: Endpoint) -> EndpointJSON:
    return {
        "id": endpoint.pk,
        "name": endpoint.name,
        "protocol": endpoint.protocol,
        "role": endpoint.role,
        "site": endpoint.site_id,
        "site_name": endpoint.site.name,
    }


def _series(
    runs: QuerySet[Run], endpoints: Sequence[Endpoint], metric: str, bucket: str
) -> list[SeriesJSON]:
    """Per endpoint (in the order given), columns of its buckets: the bucket's first day,
    n, q1, median, q3."""
    measured = runs.filter(status__in=Run.Status.MEASURED, **{f"{metric}__isnull": False})
    if sql.has_percentile_cont():
        columns = _columns_in_postgresql(measured, metric, bucket)
    else:
        columns = _columns(_quartiles_in_python(measured, metric, bucket))
    return [{"endpoint": e.pk, **columns[e.pk]} for e in endpoints if e.pk in columns]


def _columns_in_postgresql(
    measured: QuerySet[Run], metric: str, bucket: str
) -> dict[int, BucketColumns]:
    """The buckets' quartiles (percentile_cont), gathered into one row of arrays per
    endpoint: a year of days for 20 endpoints is 20 rows for Python, not 7,300."""
    days = (
        measured.annotate(t=bucket_start("created_at", bucket))
        .values("endpoint_id", "t")
        .annotate(
            n=Count("*"),
            q1=Percentile(F(metric), 0.25),
            median=Percentile(F(metric), 0.5),
            q3=Percentile(F(metric), 0.75),
        )
    )
    sql, params = days.order_by().query.sql_with_params()
    arrays = ", ".join(f"array_agg({name} ORDER BY t)" for name in ("n", "q1", "median", "q3"))
    gathered = (
        "SELECT endpoint_id, array_agg(to_char(t, 'YYYY-MM-DD') ORDER BY t), "
        f"{arrays} FROM ({sql}) AS days GROUP BY endpoint_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(gathered, params)
        rows = cursor.fetchall()
    return {
        endpoint_id: {
            "t": t,
            "n": n,
            "q1": [_round(v) for v in q1],
            "median": [_round(v) for v in median],
            "q3": [_round(v) for v in q3],
        }
        for endpoint_id, t, n, q1, median, q3 in rows
    }


def _columns(
    rows: Iterable[tuple[int, date, int, float, float, float]],
) -> dict[int, BucketColumns]:
    columns: dict[int, BucketColumns] = {}
    for endpoint_id, t, n, q1, median, q3 in rows:
        column = columns.setdefault(
            endpoint_id, {"t": [], "n": [], "q1": [], "median": [], "q3": []}
        )
        column["t"].append(t.isoformat())
        column["n"].append(n)
        column["q1"].append(_round(q1))
        column["median"].append(_round(median))
        column["q3"].append(_round(q3))
    return columns


def _quartiles_in_python(
    measured: QuerySet[Run], metric: str, bucket: str
) -> Iterable[tuple[int, date, int, float, float, float]]:
    ordered = (
        measured.annotate(t=bucket_start("created_at", bucket))
        .values_list("endpoint_id", "t", metric)
        .order_by("endpoint_id", "t", metric)
    )
    for (endpoint_id, t), group in itertools.groupby(ordered, key=lambda row: row[:2]):
        values = [row[2] for row in group]
        quartiles = (percentile(values, q) for q in (0.25, 0.5, 0.75))
        yield (endpoint_id, t, len(values), *quartiles)


def _failures(runs: QuerySet[Run]) -> list[FailureJSON]:
    """Runs that measured nothing (never in the medians), per endpoint, day, status, first
    error class and whether they are tester faults."""
    tester_fault = Case(When(q_tester_fault(), then=Value(True)), default=Value(False))
    rows = (
        runs.filter(status__in=Run.Status.UNMEASURED)
        .annotate(
            day=bucket_start("created_at", "day"),
            error_class=KT("errors__0__class"),
            tester_fault=tester_fault,
        )
        .values("endpoint_id", "day", "status", "error_class", "tester_fault")
        .annotate(n=Count("*"))
        .order_by("endpoint_id", "day", "status", "error_class", "tester_fault")
    )
    return [
        {
            "endpoint": row["endpoint_id"],
            "day": row["day"].isoformat(),
            "status": row["status"],
            "error_class": row["error_class"] or "",
            "tester_fault": bool(row["tester_fault"]),
            "n": row["n"],
        }
        for row in rows
    ]


def _runs(runs: QuerySet[Run], metric: str) -> tuple[list[RunPointJSON], bool]:
    rows = list(
        runs.filter(status__in=Run.Status.MEASURED, **{f"{metric}__isnull": False})
        .order_by("endpoint_id", "created_at", "id")
        .values_list(
            "id",
            "endpoint_id",
            "created_at",
            metric,
            "status",
            "vantage_point__name",
            "server_version",
        )[: RUNS_MAX + 1]
    )
    points: list[RunPointJSON] = [
        {
            "id": run_id,
            "endpoint": endpoint_id,
            "t": created_at.isoformat(),
            "value": _round(value),
            "status": status,
            "vantage_point": vantage_point,
            "server_version": server or None,
        }
        for run_id, endpoint_id, created_at, value, status, vantage_point, server in rows[:RUNS_MAX]
    ]
    return points, len(rows) > RUNS_MAX


def _round(value: float | None) -> float | None:
    """Six significant digits: more than any measurement holds, and a third of the bytes."""
    return None if value is None else float(f"{value:.6g}")


def failure_counts(failures: Iterable[FailureJSON]) -> dict[str, int]:
    """Runs per failure status ("tester-fault" for the tester's own), for the summary line."""
    counts: dict[str, int] = defaultdict(int)
    for row in failures:
        counts["tester-fault" if row["tester_fault"] else row["status"]] += row["n"]
    return dict(counts)


def endpoints_chosen(*, endpoint_ids: Iterable[int], site_ids: Iterable[int]) -> QuerySet[Endpoint]:
    """The endpoints named, plus every endpoint of the sites named, by site then name (the
    legend's order)."""
    chosen = Q(pk__in=list(endpoint_ids)) | Q(site_id__in=list(site_ids))
    return Endpoint.objects.filter(chosen).select_related("site").order_by("site__name", "name")
