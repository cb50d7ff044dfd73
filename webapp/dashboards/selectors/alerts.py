"""Alerts: what is failing now and what got slower, per endpoint x vantage point x parameter
set (a *group*): the selectors the home page and the alerts page share.

Failing: the group's latest ended run (cancelled runs left out) failed or timed out; it has
been failing since the first of the failures after its last measured run. Slower: the
median of the group's latest night (UTC day with measured runs) against the median of the
seven nights before it, beyond a threshold (higher-is-better metrics dropping by drop_pct,
the others rising by rise_pct).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, TypedDict

from django.db import connection
from django.db.models import (
    CharField,
    Count,
    Exists,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Greatest, NullIf, Substr, TruncDate
from django.urls import reverse
from django.utils import timezone

from webapp.campaigns.metrics import METRICS, RUN_METRICS
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Run, q_not_tester_fault
from webapp.core import sql
from webapp.dashboards.selectors.matrix import ERROR_MESSAGE_CHARS
from webapp.dashboards.selectors.parameter_sets import (
    ParameterSet,
    compare_url,
    higher_is_better,
)
from webapp.dashboards.selectors.tester_faults import TesterFaultRow, tester_faults
from webapp.sites.models import Endpoint, Site, VantagePoint

# The runs of one parameter set from one vantage point to one endpoint.
GROUP = ("vantage_point", "endpoint", *PARAMETER_SET_FIELDS)
# Metrics where "slower" means something (bytes moved is not speed), and those checked when
# none is chosen: the registry's RunMetric.speed and .alert_default.
SPEED_METRICS = [m.name for m in RUN_METRICS if m.speed]
DEFAULT_SLOWER_METRICS = [m.name for m in RUN_METRICS if m.alert_default]
DEFAULT_DAYS = 7
DEFAULT_DROP_PCT = 30.0
DEFAULT_RISE_PCT = 50.0
BASELINE_NIGHTS = 7
MIN_BASELINE_RUNS = 3
# "Got slower" is news for a month at most; its query reads every measured run of the
# window and the week before it, so a year-long window would read the whole history.
SLOWER_MAX_DAYS = 31
MAX_ROWS = 500  # per list: the page and the API say when there were more
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class GroupRow(TypedDict):
    """A group: where (vantage point, endpoint) and how (a parameter set)."""

    vantage_point: str
    endpoint: int
    endpoint_name: str
    site: int
    site_name: str
    protocol: str
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    parameter_set: str  # its label
    compare_url: str


class FailingRow(GroupRow):
    """A group whose latest ended run failed or timed out."""

    run: int
    run_url: str
    status: str
    error_class: str
    error_message: str
    last_at: datetime
    failing_since: datetime | None
    failures: int
    last_good_at: datetime | None


class SlowerRow(GroupRow):
    """A group's metric whose latest night is slower than the nights before."""

    metric: str
    unit: str
    night: str  # ISO date
    latest: float
    baseline: float
    baseline_runs: int
    change: float  # latest / baseline - 1
    factor: float  # how many times worse
    run: int
    run_url: str


class AlertsData(TypedDict):
    days: int
    slower_days: int
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


def alerts_data(*, query: dict[str, Any], now: datetime | None = None) -> AlertsData:
    """The lists for an AlertsForm's cleaned data: three queries."""
    now = now or timezone.now()
    days = query.get("days") or DEFAULT_DAYS
    filters = alerts_filters(query)
    failing = alerts_failing(since=now - timedelta(days=days), filters=filters)
    faults = tester_faults(since=now - timedelta(days=days), filters=filters)
    slower = alerts_slower(
        since=(now - timedelta(days=min(days, SLOWER_MAX_DAYS))).date(),
        filters=filters,
        metrics=query.get("metric") or DEFAULT_SLOWER_METRICS,
        drop_pct=query.get("drop_pct") or DEFAULT_DROP_PCT,
        rise_pct=query.get("rise_pct") or DEFAULT_RISE_PCT,
    )
    return {
        "days": days,
        "slower_days": min(days, SLOWER_MAX_DAYS),
        "failing_total": len(failing),
        "failing": failing[:MAX_ROWS],
        "slower_total": len(slower),
        "slower": slower[:MAX_ROWS],
        "tester_faults": faults[:MAX_ROWS],
    }


def alerts_failing(*, since: datetime, filters: dict[str, Any]) -> list[FailingRow]:
    """Groups whose latest ended run (created since `since`) failed or timed out, the newest
    breakage first. One query; each candidate's group is probed one status at a time through
    run_compare_idx (endpoint, parameter set, status, created_at), which reads only the runs
    after the candidate, or a single run, never the group's history."""
    same = {f: OuterRef(f) for f in GROUP}
    last_measured = Greatest(*(_latest_at(same, status) for status in Run.Status.MEASURED))
    streak = (
        Run.objects.filter(
            q_not_tester_fault(),
            **same,
            status__in=Run.Status.FAILED_OR_TIMED_OUT,
            created_at__gt=OuterRef("last_measured_at"),
        )
        .order_by()
        .values("endpoint")
    )
    rows = (
        Run.objects.filter(
            q_not_tester_fault(),
            status__in=Run.Status.FAILED_OR_TIMED_OUT,
            created_at__gte=since,
            **filters,
        )
        .filter(*(~Exists(_later(same, status)) for status in Run.Status.ENDED))
        .annotate(
            last_measured_at=last_measured,
            last_good_at=NullIf(_latest_at(same, Run.Status.SUCCEEDED), Value(EPOCH)),
        )
        .annotate(
            failing_since=Subquery(streak.annotate(first=Min("created_at")).values("first")),
            failures=Subquery(streak.annotate(n=Count("pk")).values("n")),
            error_class=KT("errors__0__class"),
            error_message=Substr(
                KT("errors__0__message"), 1, ERROR_MESSAGE_CHARS, output_field=CharField()
            ),
        )
        .values(
            "pk",
            "status",
            "created_at",
            *PARAMETER_SET_FIELDS,
            "vantage_point__name",
            "endpoint",
            "endpoint__name",
            "endpoint__protocol",
            "endpoint__site",
            "endpoint__site__name",
            "error_class",
            "error_message",
            "failing_since",
            "failures",
            "last_good_at",
        )
        .order_by("-failing_since", "endpoint__name", "vantage_point__name", *PARAMETER_SET_FIELDS)
    )
    return [_failing_row(row) for row in rows]


def _later(same: dict[str, OuterRef], status: str) -> QuerySet[Run]:
    """The group's runs of `status` after the outer run. One status at a time, so that the
    index range is (group, status, created_at >= the outer run's); the OR only breaks ties
    among the few rows of that range."""
    later = Run.objects.filter(**same, status=status, created_at__gte=OuterRef("created_at"))
    # A tester fault after the failure says nothing of the endpoint: it is still failing.
    return later.filter(Q(created_at__gt=OuterRef("created_at")) | Q(pk__gt=OuterRef("pk"))).filter(
        q_not_tester_fault()
    )


def _latest_at(same: dict[str, OuterRef], status: str) -> Coalesce:
    """When the group's latest run of `status` was created (the epoch if never)."""
    latest = Run.objects.filter(**same, status=status).order_by("-created_at")
    return Coalesce(Subquery(latest.values("created_at")[:1]), Value(EPOCH))


def _group_row(row: dict[str, Any]) -> GroupRow:
    parameter_set = ParameterSet(**{f: row[f] for f in PARAMETER_SET_FIELDS})
    pair = {"endpoint": row["endpoint"], "vantage_point": row["vantage_point"]}
    return {
        "vantage_point": row["vantage_point"],
        "endpoint": row["endpoint"],
        "endpoint_name": row["endpoint_name"],
        "site": row["site"],
        "site_name": row["site_name"],
        "protocol": row["protocol"],
        "method": parameter_set.method,
        "pattern": parameter_set.pattern,
        "read_size": parameter_set.read_size,
        "fraction": parameter_set.fraction,
        "clients": parameter_set.clients,
        "parameter_set": parameter_set.label,
        "compare_url": compare_url(pair, row.get("metric", "throughput_mbps"), parameter_set),
    }


def _failing_row(row: dict[str, Any]) -> FailingRow:
    row.update(
        vantage_point=row.pop("vantage_point__name"),
        endpoint_name=row.pop("endpoint__name"),
        protocol=row.pop("endpoint__protocol"),
        site=row.pop("endpoint__site"),
        site_name=row.pop("endpoint__site__name"),
    )
    return {
        **_group_row(row),
        "run": row["pk"],
        "run_url": reverse("campaigns:run-detail", args=[row["pk"]]),
        "status": row["status"],
        "error_class": row["error_class"] or "",
        "error_message": row["error_message"] or "",
        "last_at": row["created_at"],
        "failing_since": sql.aware_datetime(row["failing_since"]),
        "failures": row["failures"],
        "last_good_at": sql.aware_datetime(row["last_good_at"]),
    }


def alerts_slower(
    *,
    since: date,
    filters: dict[str, Any],
    metrics: list[str],
    drop_pct: float = DEFAULT_DROP_PCT,
    rise_pct: float = DEFAULT_RISE_PCT,
) -> list[SlowerRow]:
    """(group, metric) pairs whose latest night (on or after `since`) is slower than the
    median of the seven nights before by the thresholds, the worst first. One query: the
    groups' measured runs of those eight nights, compared in the database."""
    if not set(metrics) <= set(SPEED_METRICS) or not metrics:
        raise ValueError(f"metrics must be some of {SPEED_METRICS}")
    metrics = list(dict.fromkeys(metrics))  # ?metric=wall_s&metric=wall_s asks once
    window_start = datetime.combine(since, datetime.min.time(), UTC) - timedelta(
        days=BASELINE_NIGHTS
    )
    measured = (
        Run.objects.filter(status__in=Run.Status.MEASURED, created_at__gte=window_start, **filters)
        .annotate(night=TruncDate("created_at"))
        .values("pk", *GROUP, *metrics, "night")
        .order_by()
    )
    inner_sql, inner_params = measured.query.sql_with_params()
    sql = _slower_sql(inner_sql, metrics)
    params = [
        *inner_params,
        connection.ops.adapt_datefield_value(since),
        *[1 - drop_pct / 100 if higher_is_better(m) else 1 + rise_pct / 100 for m in metrics],
        MIN_BASELINE_RUNS,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [c[0] for c in cursor.description]
        rows = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    found = [out for row in rows for out in _slower_rows(row, metrics)]
    return sorted(found, key=lambda r: (-r["factor"], r["endpoint_name"], r["vantage_point"]))


def _slower_sql(measured_sql: str, metrics: list[str]) -> str:
    group = ", ".join(f"{c}_id" if c in ("vantage_point", "endpoint") else c for c in GROUP)
    columns = f"id, {group}, {', '.join(metrics)}, night"
    join = " AND ".join(f"m.{c} = l.{c}" for c in group.split(", "))
    medians = ",\n".join(
        f"{sql.median('m.' + m, where='m.night = l.night')} AS {m}_latest, "
        f"{sql.median('m.' + m, where='m.night < l.night')} AS {m}_baseline"
        for m in metrics
    )
    crossed = ",\n".join(
        f"CASE WHEN c.{m}_baseline > 0 AND c.{m}_latest "
        f"{'<=' if higher_is_better(m) else '>='} c.{m}_baseline * %s THEN 1 ELSE 0 END"
        f" AS {m}_crossed"
        for m in metrics
    )
    any_crossed = " OR ".join(f"f.{m}_crossed = 1" for m in metrics)
    l_group = ", ".join("l." + c for c in group.split(", "))
    return f"""
        WITH measured ({columns}) AS ({measured_sql}),
        latest AS (
            SELECT {group}, MAX(night) AS night FROM measured
            GROUP BY {group} HAVING MAX(night) >= %s
        ),
        compared AS (
            SELECT {l_group}, l.night,
                MAX(m.id) FILTER (WHERE m.night = l.night) AS run,
                COUNT(*) FILTER (WHERE m.night < l.night) AS baseline_runs,
                {medians}
            FROM latest l JOIN measured m ON {join}
                AND m.night >= {sql.days_before("l.night", BASELINE_NIGHTS)}
            GROUP BY {l_group}, l.night
        ),
        flagged AS (
            SELECT c.*, {crossed} FROM compared c WHERE c.baseline_runs >= %s
        )
        SELECT f.*, vp.name AS vantage_point, e.name AS endpoint_name,
            e.protocol AS protocol, s.id AS site, s.name AS site_name
        FROM flagged f
        JOIN {VantagePoint._meta.db_table} vp ON vp.id = f.vantage_point_id
        JOIN {Endpoint._meta.db_table} e ON e.id = f.endpoint_id
        JOIN {Site._meta.db_table} s ON s.id = e.site_id
        WHERE {any_crossed}
    """


def _slower_rows(row: dict[str, Any], metrics: list[str]) -> list[SlowerRow]:
    """One row per metric of the group that crossed its threshold (the database decided)."""
    row["endpoint"] = row["endpoint_id"]
    night = row["night"]
    out: list[SlowerRow] = []
    for metric in (m for m in metrics if row[f"{m}_crossed"]):
        latest, baseline = row[f"{metric}_latest"], row[f"{metric}_baseline"]
        worse = baseline / latest if higher_is_better(metric) else latest / baseline
        out.append(
            {
                **_group_row({**row, "metric": metric}),
                "metric": metric,
                "unit": METRICS[metric].unit,
                "night": night if isinstance(night, str) else night.isoformat(),
                "latest": latest,
                "baseline": baseline,
                "baseline_runs": row["baseline_runs"],
                "change": latest / baseline - 1,
                "factor": worse,
                "run": row["run"],
                "run_url": reverse("campaigns:run-detail", args=[row["run"]]),
            }
        )
    return out
