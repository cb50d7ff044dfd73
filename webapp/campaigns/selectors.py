"""Reads shared by the pages and the API, so both show the same numbers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Avg, Count, F, FloatField, Max, Min, QuerySet
from django.db.models.functions import TruncDay, TruncHour

from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import MEASURED

# Metrics a series may show: Run columns, with their units.
SERIES_METRICS = {
    "throughput_mbps": "MB/s",
    "wall_s": "s",
    "open_s": "s",
    "ttfb_s": "s",
    "latency_p50_us": "us",
    "latency_p90_us": "us",
    "latency_p99_us": "us",
    "cpu_s": "s",
    "bytes_wire": "B",
}
BUCKETS = {"day": TruncDay, "hour": TruncHour}


class Median(Aggregate):
    """percentile_cont(0.5) (PostgreSQL)."""

    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def run_list() -> QuerySet[Run]:
    return Run.objects.select_related("endpoint", "vantage_point", "test_file").order_by(
        "-created_at", "-id"
    )


def run_detail(run_id: int) -> Run:
    return (
        Run.objects.select_related("endpoint", "vantage_point", "test_file")
        .prefetch_related("attempts")
        .get(pk=run_id)
    )


def endpoint_series(
    *,
    endpoint_ids: Sequence[int],
    metric: str,
    since: datetime | None = None,
    until: datetime | None = None,
    bucket: str = "day",
    filters: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One metric over time per endpoint: per bucket the count, mean, median, min and max of
    the runs that measured something (succeeded or partial), aggregated in the database."""
    runs = Run.objects.filter(endpoint_id__in=endpoint_ids, status__in=MEASURED)
    runs = runs.exclude(**{f"{metric}__isnull": True}).filter(**(filters or {}))
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    if until is not None:
        runs = runs.filter(created_at__lt=until)
    value = F(metric)
    aggregates: dict[str, Any] = {
        "n": Count("id"),
        "mean": Avg(value),
        "min": Min(value),
        "max": Max(value),
    }
    if connection.vendor == "postgresql":
        aggregates["median"] = Median(value)
    rows = (
        runs.annotate(t=BUCKETS[bucket]("created_at"))
        .values("endpoint_id", "t")
        .annotate(**aggregates)
        .order_by("endpoint_id", "t")
    )
    series: dict[int, dict[str, Any]] = {
        i: {"endpoint": i, "metric": metric, "unit": SERIES_METRICS[metric], "points": []}
        for i in endpoint_ids
    }
    for row in rows:
        point = {k: row[k] for k in ("t", "n", "mean", "min", "max")}
        point["median"] = row.get("median")
        series[row["endpoint_id"]]["points"].append(point)
    return list(series.values())


def run_json(run: Run) -> dict[str, Any]:
    """A run as design.md's run JSON, with its clients' records."""
    params = {
        "endpoint": run.endpoint_id,
        "test_file": run.test_file_id,
        "url": run.test_file.url,
        "vantage_point": run.vantage_point.name,
        "method": run.method,
        "pattern": run.pattern,
        "read_size": run.read_size,
        "fraction": run.fraction,
        "clients": run.clients,
        "files": run.files,
        "depth": run.depth,
        "vector_size": run.vector_size,
        "skip": run.skip,
        "readahead": run.readahead,
        "streams": run.streams,
        "deadline_s": run.deadline_s,
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
        "served_by": run.served_by,
        "errors": run.errors,
        "clients": [_client_json(attempt) for attempt in run.attempts.all()],
    }


def _client_json(attempt: ClientAttempt) -> dict[str, Any]:
    """The client's engine record, or what the database knows of a client that never reported."""
    if attempt.record:
        return dict(attempt.record)
    error = None
    if attempt.error_class or attempt.error_message:
        error = {"class": attempt.error_class, "message": attempt.error_message}
    return {
        "client": attempt.client,
        "status": attempt.status,
        "bytes_read": attempt.bytes_read,
        "error": error,
    }
