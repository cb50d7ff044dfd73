"""Reads shared by the pages and the API, so both show the same numbers."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Aggregate, Avg, Count, F, FloatField, Max, Min, Q, QuerySet
from django.db.models.functions import TruncDay, TruncHour

from webapp.campaigns.estimates import run_moved_bytes
from webapp.campaigns.metrics import METRICS, RUN_METRICS
from webapp.campaigns.models import (
    PARAMETER_SET_FIELDS,
    Campaign,
    ClientAttempt,
    Run,
    RunCleanup,
    parameter_set_named,
)
from webapp.campaigns.traces import Trace
from webapp.core import sql
from workers.engine.params import Operation

if TYPE_CHECKING:  # django-stubs-ext is a development dependency
    from django_stubs_ext import WithAnnotations

# Metrics a series may show, with their units: the registry's (webapp/campaigns/metrics.py),
# under the name code written before it reads; new code reads METRICS.
SERIES_METRICS = {m.name: m.unit for m in RUN_METRICS}
BUCKETS = {"day": TruncDay, "hour": TruncHour}


class _Bucket(TypedDict):
    """Runs annotated with their time bucket (BUCKETS)."""

    t: datetime


class Percentile(Aggregate):
    """percentile_cont(q) (PostgreSQL): the value below which a fraction q of the group
    lies, interpolated between neighbours as numpy's default does."""

    function = "percentile_cont"
    template = "%(function)s(%(q)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, q: float) -> None:
        super().__init__(expression, q=float(q))


def percentile(ordered: Sequence[float], q: float) -> float:
    """percentile_cont over sorted values, for databases without it (SQLite)."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def run_list() -> QuerySet[Run]:
    """Runs for lists, newest first, without their JSON results (run_detail has those)."""
    return (
        Run.objects.select_related("campaign", "endpoint", "vantage_point", "test_file")
        .defer("result", "errors", "served_by")
        .order_by("-created_at", "-id")
    )


def run_detail(run_id: int) -> Run:
    return (
        Run.objects.select_related(
            "campaign", "endpoint__site", "vantage_point", "test_file", "destination_endpoint"
        )
        .prefetch_related("attempts")
        .get(pk=run_id)
    )


@dataclass(frozen=True)
class RunSummary:
    """How a campaign's runs stand: how many in each status, and when the last was created."""

    counts: dict[str, int] = field(default_factory=dict)
    last_created_at: datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def by_status(self) -> list[tuple[str, int]]:
        """The statuses that have runs, in the order of Run.Status."""
        return [(s.value, self.counts[s.value]) for s in Run.Status if self.counts.get(s.value)]


@dataclass(frozen=True)
class CampaignRow:
    """A campaign as the campaign list shows it."""

    campaign: Campaign
    endpoints: int
    matrix_size: int
    runs: RunSummary


def campaign_list() -> QuerySet[Campaign]:
    """Campaigns with the counts their matrix size needs (see campaign_rows)."""
    return (
        Campaign.objects.select_related("owner")
        .annotate(
            n_endpoints=Count("endpoints", distinct=True),
            n_readable_endpoints=Count(
                "endpoints",
                filter=Q(endpoints__enabled=True, endpoints__files__isnull=False),
                distinct=True,
            ),
            n_test_files=Count("test_files", distinct=True),
            n_enabled_test_files=Count(
                "test_files", filter=Q(test_files__endpoint__enabled=True), distinct=True
            ),
            n_vantage_points=Count("vantage_points", distinct=True),
        )
        .order_by("-created_at", "-id")
    )


def campaign_rows(campaigns: Sequence[Campaign]) -> list[CampaignRow]:
    """Rows of campaign_list()'s campaigns, with their runs summed up in one more query."""
    summaries = campaign_run_summaries(campaign_ids=[c.pk for c in campaigns])
    rows = []
    for campaign in campaigns:
        counts: Any = campaign  # with campaign_list()'s annotations
        # As Campaign.files_to_read: the chosen files, else each endpoint's default; files
        # of disabled endpoints are not read.
        chosen = counts.n_test_files
        files = counts.n_enabled_test_files if chosen else counts.n_readable_endpoints
        axes = (files, counts.n_vantage_points, *map(len, campaign.parameter_axes()))
        rows.append(
            CampaignRow(
                campaign=campaign,
                endpoints=counts.n_endpoints,
                matrix_size=math.prod(axes),
                runs=summaries.get(campaign.pk, RunSummary()),
            )
        )
    return rows


def campaign_run_summaries(*, campaign_ids: Sequence[int]) -> dict[int, RunSummary]:
    groups = (
        Run.objects.filter(campaign_id__in=campaign_ids)
        .values("campaign_id", "status")
        .annotate(n=Count("id"), last=Max("created_at"))
        .order_by()
    )
    counts: dict[int, dict[str, int]] = {}
    last: dict[int, datetime] = {}
    for group in groups:
        campaign_id = group["campaign_id"]
        counts.setdefault(campaign_id, {})[group["status"]] = group["n"]
        last[campaign_id] = max(last.get(campaign_id, group["last"]), group["last"])
    return {i: RunSummary(counts[i], last[i]) for i in counts}


@dataclass(frozen=True)
class ClientProgress:
    """How far one client of a run has read, of what it plans to read."""

    client: int
    status: str
    bytes_read: int
    bytes_planned: int


@dataclass(frozen=True)
class RunProgress:
    """How far a run has got: bytes its clients have read so far (recorded with each
    heartbeat while it runs) of those they plan to read."""

    id: int
    status: str
    final: bool
    clients: list[ClientProgress]

    @property
    def bytes_read(self) -> int:
        return sum(c.bytes_read for c in self.clients)

    @property
    def bytes_planned(self) -> int:
        return sum(c.bytes_planned for c in self.clients)

    @property
    def percent(self) -> float | None:
        if not self.bytes_planned:
            return None
        return round(min(100.0, 100.0 * self.bytes_read / self.bytes_planned), 1)

    def to_json(self, *, clients: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "final": self.final,
            "bytes_read": self.bytes_read,
            "bytes_planned": self.bytes_planned,
            "percent": self.percent,
        }
        if clients:
            data["clients"] = [vars(c) for c in self.clients]
        return data


def runs_progress(*, run_ids: Sequence[int]) -> list[RunProgress]:
    """The progress of the given runs (those that exist), in the order asked."""
    runs = Run.objects.select_related("endpoint", "test_file__endpoint").in_bulk(run_ids)
    attempts: dict[int, dict[int, tuple[str, int]]] = {}
    rows = ClientAttempt.objects.filter(run_id__in=runs).values_list(
        "run_id", "client", "status", "bytes_read"
    )
    for run_id, client, status, bytes_read in rows:
        attempts.setdefault(run_id, {})[client] = (status, bytes_read)
    return [_run_progress(runs[i], attempts.get(i, {})) for i in run_ids if i in runs]


def _run_progress(run: Run, attempts: dict[int, tuple[str, int]]) -> RunProgress:
    planned = _client_planned_bytes(run)
    clients = []
    for client in range(run.clients):
        status, bytes_read = attempts.get(client, (run.status, 0))
        clients.append(ClientProgress(client, status, bytes_read, planned[client]))
    return RunProgress(run.pk, run.status, run.is_final, clients)


def _client_planned_bytes(run: Run) -> list[int]:
    """What each client plans to read, of the files the engine gives it; what it writes or
    copies (whole files), nothing for metadata operations."""
    files = run.files_to_read()
    params = run.measured_params(files)
    if run.operation != Operation.READ:
        trace = run.trace
        moved = run_moved_bytes(
            params, run.test_file.size, trace_bytes=trace.bytes_read if trace else None
        )
        return [moved // run.clients] * run.clients
    return params.client_planned_bytes({f.url: f.size for f in files})


def endpoint_series(
    *,
    endpoint_ids: Sequence[int],
    metric: str,
    since: datetime | None = None,
    until: datetime | None = None,
    bucket: str = "day",
    filters: dict[str, Any] | None = None,
    mix: bool = False,
) -> list[dict[str, Any]]:
    """One metric over time per endpoint: per bucket the count, mean, median, min and max of
    the runs that measured something (succeeded or partial).

    The runs are of one parameter set, the same for every endpoint: the one `filters` names
    in full, else the most measured one that agrees with them (each series says which);
    with `mix`, every parameter set the filters let through counts (parameter_set null)."""
    runs = Run.objects.filter(endpoint_id__in=endpoint_ids, status__in=Run.Status.MEASURED)
    runs = runs.exclude(**{f"{metric}__isnull": True}).filter(**(filters or {}))
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    if until is not None:
        runs = runs.filter(created_at__lt=until)
    parameter_set = None if mix else series_parameter_set(runs=runs, given=filters or {})
    series: dict[int, dict[str, Any]] = {
        i: {
            "endpoint": i,
            "metric": metric,
            "unit": METRICS[metric].unit,
            "parameter_set": parameter_set,
            "points": [],
        }
        for i in endpoint_ids
    }
    if not mix and parameter_set is None:
        return list(series.values())  # nothing measured
    runs = runs.filter(**(parameter_set or {})).annotate(t=BUCKETS[bucket]("created_at"))
    if sql.has_percentile_cont():
        points = _series_points_in_database(runs, metric)
    else:
        points = _series_points_in_python(runs, metric)
    for endpoint_id, point in points:
        series[endpoint_id]["points"].append(point)
    return list(series.values())


def series_parameter_set(*, runs: QuerySet[Run], given: dict[str, Any]) -> dict[str, Any] | None:
    """The parameter set `given` names in full, else the one most of `runs` have (ties:
    the smallest values); None if `runs` is empty."""
    full = parameter_set_named(given)
    if full is not None:
        return full
    most = (
        runs.values(*PARAMETER_SET_FIELDS)
        .annotate(n=Count("id"))
        .order_by("-n", *PARAMETER_SET_FIELDS)
        .first()
    )
    return None if most is None else {name: most[name] for name in PARAMETER_SET_FIELDS}


def _series_points_in_database(
    runs: QuerySet[WithAnnotations[Run, _Bucket]], metric: str
) -> list[tuple[int, Any]]:
    value = F(metric)
    rows = (
        runs.values("endpoint_id", "t")
        .annotate(
            n=Count("id"),
            mean=Avg(value),
            median=Percentile(value, 0.5),
            min=Min(value),
            max=Max(value),
        )
        .order_by("endpoint_id", "t")
    )
    return [
        (
            row["endpoint_id"],
            {
                "t": row["t"],
                "n": row["n"],
                "mean": row["mean"],
                "median": row["median"],
                "min": row["min"],
                "max": row["max"],
            },
        )
        for row in rows
    ]


def _series_points_in_python(
    runs: QuerySet[WithAnnotations[Run, _Bucket]], metric: str
) -> list[tuple[int, Any]]:
    """What _series_points_in_database computes, for SQLite (no percentile_cont): one query."""
    ordered = runs.values_list("endpoint_id", "t", metric).order_by("endpoint_id", "t", metric)
    points = []
    for (endpoint_id, t), group in itertools.groupby(ordered, key=lambda row: row[:2]):
        values = [row[2] for row in group]
        point = {
            "t": t,
            "n": len(values),
            "mean": math.fsum(values) / len(values),
            "median": percentile(values, 0.5),
            "min": values[0],
            "max": values[-1],
        }
        points.append((endpoint_id, point))
    return points


# The run JSON's figures of operations other than reads, as the engine writes them.
RUN_JSON_OPERATION_FIELDS = ("address", "bytes_written", "server_checksum", "tpc", "ops_per_s")


def run_trace(run: Run) -> dict[str, Any] | None:
    """The trace a replay replayed, {"id", "name", "sha256"} (the one it was launched with,
    whatever its campaign names since); None for other runs. Not the CSV: it can be 4 MiB."""
    if run.trace_id is None:
        return None
    found = Trace.objects.filter(pk=run.trace_id).values("id", "name", "sha256").first()
    return dict(found) if found else None


def run_json(run: Run) -> dict[str, Any]:
    """A run as the run JSON of docs/engine.md, with its clients' records."""
    result = run.result if isinstance(run.result, dict) else {}
    params = {
        "endpoint": run.endpoint_id,
        "test_file": run.test_file_id,
        "url": run.test_file.url,
        "vantage_point": run.vantage_point.name,
        **run.parameters(),
        "repetition": run.repetition,
    }
    return {
        "id": run.pk,
        "campaign": run.campaign_id,
        "status": run.status,
        "trigger": run.trigger,
        "worker": run.worker,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "params": params,
        # What the run did (docs/engine.md): its operation, the address family asked for
        # and the address used, what it wrote, the server's checksum, a copy's markers, a
        # metadata storm's rate; null where the run JSON has none (a read's, an older one).
        "operation": run.operation,
        "address_family": result.get("address_family", run.address_family),
        **{name: result.get(name) for name in RUN_JSON_OPERATION_FIELDS},
        "trace": run_trace(run),
        "wall_s": run.wall_s,
        "open_s": run.open_s,
        "ttfb_s": run.ttfb_s,
        "throughput_mbps": run.throughput_mbps,
        "ops": run.ops,
        "op_latency_us": {
            "p50": run.latency_p50_us,
            "p90": run.latency_p90_us,
            "p99": run.latency_p99_us,
            "max": run.latency_max_us,
        },
        "bytes_requested": run.bytes_requested,
        "bytes_read": run.bytes_read,
        "bytes_wire": run.bytes_wire,
        "cpu_s": run.cpu_s,
        "auth": run.auth or None,
        "tls": run.tls,
        "server_version": run.server_version or None,
        "client_version": run.client_version or None,
        "served_by": run.served_by,
        "errors": run.errors,
        # A lost write's or copy's deletion of what it left (webapp.campaigns.cleanups).
        "cleanup": _cleanup_json(run),
        "clients": [_client_json(attempt) for attempt in run.attempts.all()],
    }


def _cleanup_json(run: Run) -> dict[str, Any] | None:
    cleanup = RunCleanup.objects.filter(run=run).first()
    return None if cleanup is None else cleanup.to_json()


def _client_json(attempt: ClientAttempt) -> dict[str, Any]:
    """The client's engine record, or what the database knows of a client that never reported."""
    if attempt.record:
        return dict(attempt.record)
    return {
        "client": attempt.client,
        "status": attempt.status,
        "bytes_read": attempt.bytes_read,
        "error": attempt.error_json(),
    }
