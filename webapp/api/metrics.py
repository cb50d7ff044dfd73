"""GET /metrics: fedprobe's results and its own health for Prometheus, in the OpenMetrics
text format (docs/monitoring.md lists every family, its labels and their cardinality).

Everything is read from the database when Prometheus scrapes: the web application runs as
several gunicorn workers, so counters kept in one process's memory would each tell a part.
A scrape costs a fixed number of aggregate queries, whatever the number of series: one for
every series' latest night (the watch's SeriesLatest joined with that night's rollup), one
for the live regressions, a few for the vantage points and for fedprobe's own queues.

Labels are names an operator gave (site, endpoint, vantage point), a protocol, and the
parameter set as a short stable name (`params`, SeriesId's order: method:pattern:read_size:
fraction:clients); never messages or other free text. A series is exported while it has a
night within SERIES_NIGHTS: one that stopped being measured leaves the scrape rather than
staying forever.
"""

from __future__ import annotations

import gzip
import hmac
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from ipaddress import ip_address, ip_network
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models import Count, Max, Min, OuterRef, Subquery
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry
from rest_framework.throttling import BaseThrottle

from webapp.archivers.selectors import backlog
from webapp.campaigns.health import vantage_points_health
from webapp.campaigns.metrics import METRICS, RUN_METRICS, RunMetric
from webapp.campaigns.models import Run
from webapp.core import sql
from webapp.notifications.models import Delivery
from webapp.sites.models import Endpoint, Site, VantagePoint
from webapp.watch.models import Regression, SeriesLatest, SeriesNight, WatchPass
from webapp.watch.rollups import SERIES_FIELDS

# A series with no night (of the site's, or measured) within this many nights is left out.
SERIES_NIGHTS = 30
# Ended runs are counted over this window (counting a year of runs on every scrape would
# read them all; queued and running ones are counted whole).
RUNS_WINDOW = timedelta(hours=24)
# The regressions an operator still has to see to: confirmed and not yet good again for long.
OPEN_STATES = (
    Regression.State.OPEN,
    Regression.State.ACKNOWLEDGED,
    Regression.State.RECOVERING,
)
SERIES_LABELS = ["site", "endpoint", "protocol", "vantage_point", "params"]
REGRESSION_LABELS = ["severity", "state", *SERIES_LABELS]


def params_name(
    method: str,
    pattern: str,
    read_size: int,
    fraction: float,
    clients: int,
    *,
    operation: str = "read",
    address_family: str = "any",
) -> str:
    """A parameter set's short stable name, the `params` label: "direct:random:65536:0.1:2".
    A read's over any family is as it was; another operation leads ("write+direct:..."), a
    pinned family follows the method ("direct@6:..."), as in the watch's regression keys:
    two series never share one label set."""
    if operation not in ("read", ""):
        method = f"{operation}+{method}"
    if address_family not in ("any", ""):
        method = f"{method}@{address_family}"
    return f"{method}:{pattern}:{read_size}:{fraction:g}:{clients}"


class FedprobeCollector(Collector):
    """The families of one scrape read at `now`, but the per-series ones (series_exposition)."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        yield from regression_families()
        yield from vantage_point_families(now=self.now)
        yield from own_health_families(now=self.now)


@dataclass(frozen=True)
class SeriesFamily:
    """A gauge with one sample a series: its name, help, and its value in a series' row."""

    name: str
    help: str
    value: Callable[[tuple[Any, ...]], float | None]


def _median(at: int) -> Callable[[tuple[Any, ...]], float | None]:
    return lambda row: row[at]


def _availability(row: tuple[Any, ...]) -> float | None:
    runs, succeeded, partial, tester_faults = row[10:14]
    judged = (runs or 0) - (tester_faults or 0)
    return (succeeded + partial / 2) / judged if judged > 0 else None


def exported_metrics() -> list[RunMetric]:
    """The run metrics exported per series (FEDPROBE_METRICS_SERIES_METRICS), in the
    registry's order; ImproperlyConfigured naming any unknown one."""
    names = settings.FEDPROBE_METRICS_SERIES_METRICS
    if names == ["all"]:
        return list(RUN_METRICS)
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise ImproperlyConfigured(
            f"FEDPROBE_METRICS_SERIES_METRICS names no run metric: {', '.join(unknown)} "
            f"(known: {', '.join(METRICS)}, or all)"
        )
    return [m for m in RUN_METRICS if m.name in names]


exported_metrics()  # a misspelt setting fails at start-up (URLs load), not on the first scrape


def series_families(metrics: list[RunMetric]) -> list[SeriesFamily]:
    """The per-series families: `metrics`' medians (columns 14... of a row), availability
    and failing."""
    medians = [
        SeriesFamily(
            f"fedprobe_series_{m.name}",
            f"{m.label} ({m.unit}): the {m.aggregate} of the series' latest measured night",
            _median(14 + i),
        )
        for i, m in enumerate(metrics)
    ]
    availability = SeriesFamily(
        "fedprobe_series_availability_ratio",
        "Up runs / (runs - tester faults) of the series' latest night (a partial run is half "
        "up), as the watch counts",
        _availability,
    )
    failing = SeriesFamily(
        "fedprobe_series_failing",
        "1 when every run of the site's on the series' latest night failed or timed out",
        lambda row: 1.0 if row[9] else 0.0,
    )
    return [*medians, availability, failing]


def series_exposition(*, now: datetime) -> str:
    """The per-series families in the OpenMetrics text format. Written here rather than by
    prometheus_client's generate_latest, which checks and escapes every label of every
    sample again (13 s for the 165,000 samples of 15,000 series; benches/metrics_scrape.py):
    a series' labels are escaped once and shared by its samples of every family."""
    metrics = exported_metrics()
    rows = _series_rows(now, metrics)
    labels = [_labels(row) for row in rows]
    lines = []
    for family in series_families(metrics):
        lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge"]
        for row, label in zip(rows, labels, strict=True):
            value = family.value(row)
            if value is not None:
                lines.append(f"{family.name}{label} {_number(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def _number(value: float) -> str:
    """A sample value as OpenMetrics writes it (repr for a finite float)."""
    if math.isfinite(value):
        return repr(float(value))
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _labels(row: tuple[Any, ...]) -> str:
    # The operation and the family are the row's last two columns (after the medians).
    params = params_name(*row[4:9], operation=row[-2], address_family=row[-1])
    values = (row[0], row[1], row[2], row[3], params)
    pairs = ",".join(
        f'{name}="{label_value(value)}"' for name, value in zip(SERIES_LABELS, values, strict=True)
    )
    return "{" + pairs + "}"


def label_value(text: str) -> str:
    """A label value as OpenMetrics writes it: backslash, newline and double quote escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _series_rows(now: datetime, metrics: list[RunMetric]) -> list[tuple[Any, ...]]:
    """One row a series: names, parameter set, failing, its latest night's counts and its
    latest measured night's medians of `metrics`. One statement: SeriesLatest joined
    with the two rollup rows it points at (each by the rollup's unique index)."""
    latest, night = SeriesLatest._meta.db_table, SeriesNight._meta.db_table
    medians = "".join(f", {sql.json_number('m.metrics', m.name, 'median')}" for m in metrics)

    def same_series(alias: str) -> str:
        return " AND ".join(f"{alias}.{column} = sl.{column}" for column in SERIES_FIELDS)

    statement = f"""
        SELECT s.name, e.name, e.protocol, v.name,
            sl.method, sl.pattern, sl.read_size, sl.fraction, sl.clients, sl.failing,
            a.runs, a.succeeded, a.partial, a.tester_faults{medians},
            sl.operation, sl.address_family
        FROM {latest} sl
        JOIN {Endpoint._meta.db_table} e ON e.id = sl.endpoint_id
        JOIN {Site._meta.db_table} s ON s.id = e.site_id
        JOIN {VantagePoint._meta.db_table} v ON v.id = sl.vantage_point_id
        LEFT JOIN {night} a ON {same_series("a")} AND a.night = sl.site_night
        LEFT JOIN {night} m ON {same_series("m")} AND m.night = sl.measured_night
        WHERE sl.site_night >= %(since)s OR sl.measured_night >= %(since)s
        ORDER BY s.name, e.name, v.name, sl.method, sl.pattern, sl.read_size, sl.fraction,
            sl.clients, sl.operation, sl.address_family
    """
    since = (now - timedelta(days=SERIES_NIGHTS)).date()
    with connection.cursor() as cursor:
        cursor.execute(statement, {"since": since})
        return list(cursor.fetchall())


def regression_families() -> list[Metric]:
    """Live regressions: every live state counted by severity, and the open ones by what they
    are about (a series, or the one thing they were blamed on: its other labels are empty)."""
    live = GaugeMetricFamily(
        "fedprobe_regressions",
        "Live regressions by state and severity",
        labels=["state", "severity"],
    )
    counted = (
        Regression.objects.filter(state__in=Regression.LIVE)
        .order_by("state", "severity")
        .values_list("state", "severity")
        .annotate(n=Count("id"))
    )
    for state, severity, n in counted:
        live.add_metric([state, severity], n)
    open_ = GaugeMetricFamily(
        "fedprobe_regressions_open",
        "Open, acknowledged or recovering regressions by severity and what they are about",
        labels=REGRESSION_LABELS,
    )
    for row in _open_regression_rows():
        severity, state, site, endpoint, protocol, point, *parameters, n = row
        operation, family = parameters[5:]
        params = (
            params_name(*parameters[:5], operation=operation, address_family=family)
            if None not in parameters
            else ""
        )
        labels = [severity, state, site or "", endpoint or "", protocol, point or "", params]
        open_.add_metric(labels, n)
    return [live, open_]


def _open_regression_rows() -> Iterable[tuple[Any, ...]]:
    return (
        Regression.objects.filter(state__in=OPEN_STATES)
        .order_by()
        .values_list(
            "severity",
            "state",
            "site__name",
            "endpoint__name",
            "protocol",
            "vantage_point__name",
            "method",
            "pattern",
            "read_size",
            "fraction",
            "clients",
            "operation",
            "address_family",
        )
        .annotate(n=Count("id"))
    )


def vantage_point_families(*, now: datetime) -> list[Metric]:
    """Per vantage point (revoked ones left out): its live workers, the age of its newest
    heartbeat, the runs queued for it and when it last started one."""
    labels = ["vantage_point"]
    workers = GaugeMetricFamily(
        "fedprobe_vantage_point_workers_live", "Workers whose heartbeat is fresh", labels=labels
    )
    heartbeat = GaugeMetricFamily(
        "fedprobe_vantage_point_heartbeat_age_seconds",
        "Seconds since any worker of the vantage point last reported (absent: never)",
        labels=labels,
    )
    queued = GaugeMetricFamily(
        "fedprobe_vantage_point_queued_runs",
        "Runs queued for the vantage point in the database (the broker is not asked)",
        labels=labels,
    )
    last_run = GaugeMetricFamily(
        "fedprobe_vantage_point_last_run_started_timestamp_seconds",
        "When the vantage point's workers last started a run (absent: never)",
        labels=labels,
    )
    started = Run.objects.filter(vantage_point=OuterRef("pk")).order_by("-started_at")
    points = list(
        VantagePoint.objects.filter(revoked_at=None)
        .annotate(last_started=Subquery(started.values("started_at")[:1]))
        .order_by("name")
    )
    health = vantage_points_health(vantage_points=points, now=now)
    for point in points:
        seen = health[point.pk]
        workers.add_metric([point.name], len(seen.live_workers))
        queued.add_metric([point.name], seen.queued_runs)
        if seen.last_seen is not None:
            heartbeat.add_metric([point.name], max(0.0, (now - seen.last_seen).total_seconds()))
        if point.last_started is not None:
            last_run.add_metric([point.name], point.last_started.timestamp())
    return [workers, heartbeat, queued, last_run]


def own_health_families(*, now: datetime) -> list[Metric]:
    """fedprobe's own queues: runs waiting or measuring, runs ended lately by outcome, the
    notifications and archive deliveries still to send, and the watch's last pass."""
    active = GaugeMetricFamily(
        "fedprobe_runs_active", "Runs queued or measuring, by state", labels=["state"]
    )
    counts = dict(_count_by_status(Run.objects.filter(status__in=Run.Status.ACTIVE)))
    for state in Run.Status.ACTIVE:
        active.add_metric([state], counts.get(state, 0))
    ended = GaugeMetricFamily(
        "fedprobe_runs_ended_24h",
        "Runs created in the last 24 hours that ended, by state",
        labels=["state"],
    )
    recent = Run.objects.filter(status__in=Run.Status.FINAL, created_at__gte=now - RUNS_WINDOW)
    counts = dict(_count_by_status(recent))
    for state in Run.Status.FINAL:
        ended.add_metric([state], counts.get(state, 0))
    return [active, ended, *_delivery_families(now), *_archiver_families(now), _watch_family()]


def _count_by_status(runs: Any) -> Iterable[tuple[str, int]]:
    return runs.order_by().values_list("status").annotate(n=Count("id"))  # type: ignore[no-any-return]


def _delivery_families(now: datetime) -> list[Metric]:
    backlog = GaugeMetricFamily(
        "fedprobe_notifications_backlog",
        "Notification deliveries not sent yet (pending, or being sent)",
        labels=["status"],
    )
    oldest = GaugeMetricFamily(
        "fedprobe_notifications_oldest_pending_age_seconds",
        "Seconds since the oldest delivery not sent yet was made (0: none waits)",
    )
    waiting = (Delivery.Status.PENDING, Delivery.Status.SENDING)
    rows = (
        Delivery.objects.filter(status__in=waiting)
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"), first=Min("created_at"))
    )
    found = {status: (n, first) for status, n, first in rows}
    for status in waiting:
        backlog.add_metric([status], found.get(status, (0, None))[0])
    firsts = [first for _, first in found.values() if first is not None]
    oldest.add_metric([], max(0.0, (now - min(firsts)).total_seconds()) if firsts else 0.0)
    return [backlog, oldest]


def _archiver_families(now: datetime) -> list[Metric]:
    """Each archiver's backlog (webapp.archivers.selectors.backlog, one query): one sample an
    archiver, whose name an operator gave; their number is the archivers', a handful."""
    labels = ["archiver"]
    pending = GaugeMetricFamily(
        "fedprobe_archiver_backlog",
        "Finished runs not yet delivered to the archiver (pending, or being sent)",
        labels=labels,
    )
    oldest = GaugeMetricFamily(
        "fedprobe_archiver_oldest_pending_age_seconds",
        "Seconds since the oldest run not yet delivered to the archiver was queued (0: none)",
        labels=labels,
    )
    failed = GaugeMetricFamily(
        "fedprobe_archiver_failed",
        "Runs the archiver's deliveries gave up on (shown in the admin with their last error)",
        labels=labels,
    )
    for row in backlog(now=now):
        pending.add_metric([row.name], row.pending)
        oldest.add_metric([row.name], max(0.0, row.oldest_pending_s or 0.0))
        failed.add_metric([row.name], row.failed)
    return [pending, oldest, failed]


def _watch_family() -> Metric:
    family = GaugeMetricFamily(
        "fedprobe_watch_last_pass_timestamp_seconds",
        "When the watch's last pass finished (absent: never)",
    )
    finished = WatchPass.objects.aggregate(last=Max("finished_at"))["last"]
    if finished is not None:
        family.add_metric([], finished.timestamp())
    return family


# The view.

NOT_ENABLED = (
    "/metrics is off: set FEDPROBE_METRICS_TOKEN (a bearer token for the scraper) or "
    "FEDPROBE_METRICS_ALLOW (the scraper's networks); see docs/monitoring.md\n"
)


def scrape_refusal(request: HttpRequest) -> tuple[int, str] | None:
    """Why `request` may not read /metrics (status, message), or None when it may: it sends
    the scrape token, or comes from an allowed network."""
    token, networks = settings.FEDPROBE_METRICS_TOKEN, settings.FEDPROBE_METRICS_ALLOW
    if not token and not networks:
        return 404, NOT_ENABLED
    if token and _bearer_matches(request, token):
        return None
    if networks and _address_allowed(request, networks):
        return None
    return 403, "/metrics needs the scrape token (Authorization: Bearer) or an allowed address\n"


def _bearer_matches(request: HttpRequest, token: str) -> bool:
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    # Compared in constant time: how much of a guess matched must not show in the timing.
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())


def _address_allowed(request: HttpRequest, networks: list[str]) -> bool:
    """The client address as the throttles count it (behind FEDPROBE_NUM_PROXIES proxies, the
    one the nearest proxy saw: a client cannot forge it through X-Forwarded-For)."""
    try:
        address = ip_address(BaseThrottle().get_ident(request))  # type: ignore[arg-type]
    except ValueError:
        return False
    return any(address in ip_network(network) for network in networks)


def exposition(*, now: datetime) -> bytes:
    """The whole scrape: the per-series families, then the others, then OpenMetrics' end."""
    registry = CollectorRegistry()
    registry.register(FedprobeCollector(now=now))
    others: bytes = generate_latest(registry)  # type: ignore[no-untyped-call]  # untyped upstream
    return series_exposition(now=now).encode() + others  # others end with "# EOF"


@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The OpenMetrics exposition, gzipped when the scraper accepts it (Prometheus does)."""
    refusal = scrape_refusal(request)
    if refusal is not None:
        status, message = refusal
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    body = exposition(now=timezone.now())
    response = HttpResponse(content_type=CONTENT_TYPE_LATEST)
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        body = gzip.compress(body, compresslevel=1)  # fast: a scrape is read once
        response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    response.content = body
    return response
