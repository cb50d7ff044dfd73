"""Nightly rollups: the runs of one UTC night summed up per series (SeriesNight), so the watch
and the pages read a few thousand rows a night instead of the raw runs.

A night's rows are computed from the runs created that night, cancelled ones left out, in one
set-based statement on PostgreSQL (percentile_cont for the quartiles and the MAD) and in
Python on SQLite (the same interpolation), then upserted: rolling a night up again gives the
same rows. `rollups_refresh` rolls up only the nights whose runs ended since the last pass (a
watermark on the runs' finished_at), so a night's pass touches that night's series only, and a
run that ended late for an older night re-rolls that night alone.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from webapp.campaigns.metrics import RUN_METRICS
from webapp.campaigns.models import Run, errors_are_tester_fault, sql_tester_fault
from webapp.core import sql
from webapp.watch.models import SeriesNight, WatchPass

# The run metrics a night's row keeps a distribution of: every one of the registry.
ROLLUP_METRICS = tuple(m.name for m in RUN_METRICS)
SERIES_FIELDS = (
    "endpoint_id",
    "vantage_point_id",
    "operation",
    "method",
    "pattern",
    "read_size",
    "fraction",
    "clients",
    "address_family",
)
ENDED = tuple(str(s) for s in Run.Status.ENDED)
MEASURED = tuple(str(s) for s in Run.Status.MEASURED)
WITH_FAILURES = tuple(str(s) for s in Run.Status.WITH_FAILURES)
FAILED_OR_TIMED_OUT = tuple(str(s) for s in Run.Status.FAILED_OR_TIMED_OUT)
# A failed run that recorded no error: its status says what happened.
UNRECORDED_CLASS = "unknown"
# Runs that ended this recently are left to the next pass (their transactions may not have
# committed yet).
SETTLE_S = 300
# Nights rolled up in one statement when many changed (the first pass over a history).
NIGHTS_PER_STATEMENT = 14
# A refresh that wrote this many rows updates the table's statistics before the evaluation.
ANALYZE_AFTER_ROWS = 100_000
# Groups of up to this many measured runs (one run a night is the usual case) get their
# quartiles and MAD from their lowest and highest figure, exactly as percentile_cont would,
# without sorting each group twice per metric.
SMALL_GROUP = 2
# The rollup statement's sort memory (a fortnight of a 500-endpoint federation: ~40 MB).
SORT_MEMORY = "64MB"


@dataclass(frozen=True)
class Refreshed:
    """What a pass's refresh rolled up: the changed nights, the older nights it backfilled,
    their rows, the watermark it moved to, and the nights still to be backfilled."""

    nights: list[date]
    rows: int
    watermark: datetime | None
    first_pass: bool  # no pass had rolled anything up before
    backfilled: list[date] = field(default_factory=list)
    backfill_before: date | None = None  # the nights before it are not rolled up yet


def night_bounds(night: date) -> tuple[datetime, datetime]:
    start = datetime.combine(night, time(), tzinfo=UTC)
    return start, start + timedelta(days=1)


def series_nights_roll_up(*, night: date) -> int:
    """Compute and upsert the SeriesNight rows of `night`; remove those no run backs any more.
    Returns the rows written."""
    return series_nights_roll_up_range(first=night, last=night)


def series_nights_roll_up_range(*, first: date, last: date) -> int:
    """series_nights_roll_up for each night from `first` to `last`, in one statement."""
    start, _ = night_bounds(first)
    _, end = night_bounds(last)
    written_at = timezone.now()
    with transaction.atomic():
        if sql.has_percentile_cont():
            written = _upsert_in_database(start, end, written_at)
        else:
            written = _upsert_in_python(start, end, written_at)
        SeriesNight.objects.filter(night__gte=first, night__lte=last).exclude(
            updated_at__gte=written_at
        ).delete()
    return written


def rollups_refresh(*, now: datetime) -> Refreshed:
    """Roll up the nights (up to `now`'s) whose runs ended since the last pass's watermark,
    and before SETTLE_S ago: a run's end is written in the transaction that commits it, so
    a run seen ending before the cutoff is committed, and none commits behind the mark.

    The first pass over a history rolls up the FEDPROBE_WATCH_LOOKBACK_NIGHTS nights the
    watch evaluates from and leaves the older ones to the passes after it, which roll up
    FEDPROBE_WATCH_BACKFILL_NIGHTS of them each, newest first (`backfill_before` says how
    far they have got), so no pass spends long on the history."""
    last_pass = WatchPass.objects.exclude(watermark=None).order_by("-watermark", "-id").first()
    since = last_pass.watermark if last_pass else None
    cutoff = now - timedelta(seconds=SETTLE_S)
    changed = Run.objects.filter(status__in=ENDED, finished_at__lte=cutoff)
    if since is not None:
        changed = changed.filter(finished_at__gt=since)
    watermark = _max_finished(changed) or since
    nights = sorted(
        night for night in changed.order_by().dates("created_at", "day") if night <= now.date()
    )
    if since is None:
        nights, backfill_before = _lookback_only(nights)
        backfilled: list[date] = []
    else:
        backfilled, backfill_before = _backfill(last_pass.backfill_before if last_pass else None)
    rows = _roll_up_chunks(list(_runs_of_nights(sorted({*backfilled, *nights}))))
    if rows >= ANALYZE_AFTER_ROWS and sql.is_postgresql():
        # The planner's figures of a table that just grew by weeks of rows are stale: the
        # evaluation's reads would take a plan meant for a few rows (seconds per chunk).
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {SeriesNight._meta.db_table}")
    return Refreshed(
        nights=nights,
        rows=rows,
        watermark=watermark,
        first_pass=since is None,
        backfilled=backfilled,
        backfill_before=backfill_before,
    )


def _roll_up_chunks(chunks: Sequence[list[date]]) -> int:
    """Roll up each chunk of nights (one statement each), on up to
    FEDPROBE_WATCH_ROLLUP_CONNECTIONS connections at once: the chunks' nights are disjoint,
    so their statements neither wait for nor change each other's rows. One after the other
    on SQLite, and inside a transaction (whose rows another connection could not see)."""
    connections = min(settings.FEDPROBE_WATCH_ROLLUP_CONNECTIONS, len(chunks))
    if connections <= 1 or not sql.is_postgresql() or connection.in_atomic_block:
        return sum(series_nights_roll_up_range(first=c[0], last=c[-1]) for c in chunks)
    with ThreadPoolExecutor(max_workers=connections, thread_name_prefix="rollup") as pool:
        return sum(pool.map(_roll_up_on_own_connection, chunks))


def _roll_up_on_own_connection(chunk: list[date]) -> int:
    """series_nights_roll_up_range in a worker thread, on that thread's own connection
    (Django's connections are per thread), closed after."""
    try:
        return series_nights_roll_up_range(first=chunk[0], last=chunk[-1])
    finally:
        connection.close()


def _lookback_only(nights: list[date]) -> tuple[list[date], date | None]:
    """The first pass's nights: the lookback of the latest; and where the backfill starts
    (None when the history is no longer than that)."""
    if not nights:
        return nights, None
    first = nights[-1] - timedelta(days=settings.FEDPROBE_WATCH_LOOKBACK_NIGHTS - 1)
    recent = [night for night in nights if night >= first]
    return recent, (first if recent != nights else None)


def _backfill(before: date | None) -> tuple[list[date], date | None]:
    """The older nights this pass rolls up (up to FEDPROBE_WATCH_BACKFILL_NIGHTS before
    `before`, down to the history's first night), and where the next pass goes on."""
    if before is None:
        return [], None
    start, _ = night_bounds(before)
    oldest = (
        Run.objects.filter(created_at__lt=start, status__in=ENDED)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    if oldest is None:
        return [], None
    history_from = oldest.astimezone(UTC).date()
    days = settings.FEDPROBE_WATCH_BACKFILL_NIGHTS
    first = max(history_from, before - timedelta(days=days))
    nights = [first + timedelta(days=n) for n in range((before - first).days)]
    return nights, (first if first > history_from else None)


def rollups_backfill_before() -> date | None:
    """The night before which the rollups are not complete yet (the first passes over a
    history backfill them): pages that read older nights say "still rolling up" rather than
    show the missing nights as empty. None once every night is rolled up."""
    last_pass = WatchPass.objects.exclude(watermark=None).order_by("-watermark", "-id").first()
    return last_pass.backfill_before if last_pass else None


def _max_finished(runs: Any) -> datetime | None:
    latest: datetime | None = (
        runs.order_by("-finished_at").values_list("finished_at", flat=True).first()
    )
    return latest


def _runs_of_nights(nights: Sequence[date]) -> Iterable[list[date]]:
    """Consecutive nights in chunks of at most NIGHTS_PER_STATEMENT (a gap starts a chunk)."""
    chunk: list[date] = []
    for night in nights:
        if chunk and (night - chunk[-1] > timedelta(days=1) or len(chunk) >= NIGHTS_PER_STATEMENT):
            yield chunk
            chunk = []
        chunk.append(night)
    if chunk:
        yield chunk


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)  # our own constants, never input


def _finite(metric: str) -> str:
    """The run's figure, NULL unless finite (a NaN or an infinity is no measurement)."""
    if Run._meta.get_field(metric).get_internal_type() != "FloatField":
        return metric
    return f"CASE WHEN {metric} IN ('NaN', 'Infinity', '-Infinity') THEN NULL ELSE {metric} END"


def _group_columns() -> str:
    """Per metric: its runs, lowest and highest figure, and (in groups of more than
    SMALL_GROUP measured runs only) its quartiles."""
    return ",\n".join(
        f"COUNT({m}) FILTER (WHERE measured) AS {m}_n, "
        f"MIN({m}) FILTER (WHERE measured) AS {m}_lo, "
        f"MAX({m}) FILTER (WHERE measured) AS {m}_hi, "
        f"percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY {m}) "
        f"FILTER (WHERE measured AND group_measured > {SMALL_GROUP}) AS {m}_q"
        for m in ROLLUP_METRICS
    )


def _spread_columns() -> str:
    """Per metric, the MAD of a group of more than SMALL_GROUP measured runs."""
    return ",\n".join(
        f"percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(r.{m} - g.{m}_q[2])) "
        f"FILTER (WHERE r.measured) AS {m}_mad"
        for m in ROLLUP_METRICS
    )


def _lerp(metric: str, q: float) -> str:
    """percentile_cont's interpolation between a group's lowest and highest figure: exact
    for one or two values."""
    return f"(g.{metric}_lo + (g.{metric}_hi - g.{metric}_lo) * {q})"


def _small_mad(metric: str) -> str:
    """The MAD of one or two values as percentile_cont gives it: the deviations of the
    lowest and the highest from their median, interpolated halfway."""
    median = _lerp(metric, 0.5)
    low, high = f"({median} - g.{metric}_lo)", f"(g.{metric}_hi - {median})"
    return f"(LEAST({low}, {high}) + (GREATEST({low}, {high}) - LEAST({low}, {high})) * 0.5)"


def _metrics_json() -> str:
    """The metrics column as JSON text cast once: jsonb_build_object costs about three times
    as much (it looks up how to write each of its 45 arguments on every row)."""
    parts = []
    for m in ROLLUP_METRICS:
        big = f"g.group_measured > {SMALL_GROUP}"
        figures = {
            "median": f"CASE WHEN {big} THEN g.{m}_q[2] ELSE {_lerp(m, 0.5)} END",
            "q1": f"CASE WHEN {big} THEN g.{m}_q[1] ELSE {_lerp(m, 0.25)} END",
            "q3": f"CASE WHEN {big} THEN g.{m}_q[3] ELSE {_lerp(m, 0.75)} END",
            "mad": f"CASE WHEN {big} THEN s.{m}_mad ELSE {_small_mad(m)} END",
            "n": f"g.{m}_n",
        }
        text = " || ', ' || ".join(f"'\"{k}\": ' || ({v})::text" for k, v in figures.items())
        parts.append(f"CASE WHEN g.{m}_n > 0 THEN '\"{m}\": {{' || {text} || '}}' END")
    return f"('{{' || concat_ws(', ', {', '.join(parts)}) || '}}')::jsonb"


def _errors_json() -> str:
    """{class: runs} of the group's site failures, counted only for groups that have any."""
    return (
        "CASE WHEN g.failure_classes IS NULL THEN '{}'::jsonb ELSE (SELECT "
        "jsonb_object_agg(class, n) FROM (SELECT class, COUNT(*) AS n "
        "FROM unnest(g.failure_classes) AS class GROUP BY class) counted) END"
    )


def _upsert_in_database(start: datetime, end: datetime, written_at: datetime) -> int:
    keys = ", ".join(SERIES_FIELDS)
    g_keys = ", ".join(f"g.{f}" for f in SERIES_FIELDS)
    joined = " AND ".join(f"r.{f} = g.{f}" for f in ("night", *SERIES_FIELDS))
    columns = ", ".join(
        (
            "night",
            keys,
            "runs, succeeded, partial, failed, tester_faults, errors, metrics, "
            "server_versions, client_versions, updated_at",
        )
    )
    finite = ", ".join(f"{_finite(m)} AS {m}" for m in ROLLUP_METRICS)
    statement = f"""
    WITH runs AS (
        SELECT (created_at AT TIME ZONE 'UTC')::date AS night, {keys}, status, server_version,
            client_version,
            {finite},
            status IN ({_quoted(MEASURED)}) AS measured,
            CASE WHEN status IN ({_quoted(WITH_FAILURES)}) THEN
                COALESCE(errors -> 0 ->> 'class',
                         CASE WHEN status = 'timeout' THEN 'timeout'
                              ELSE '{UNRECORDED_CLASS}' END)
            END AS error_class,
            (status IN ({_quoted(FAILED_OR_TIMED_OUT)})
             AND {sql_tester_fault("errors")})
                AS tester_fault
        FROM campaigns_run
        WHERE created_at >= %(start)s AND created_at < %(end)s
          AND status IN ({_quoted(ENDED)})
    ), r AS (
        SELECT runs.*, COUNT(*) FILTER (WHERE measured)
            OVER (PARTITION BY night, {keys}) AS group_measured
        FROM runs
    ), g AS (
        SELECT night, {keys}, group_measured, COUNT(*) AS runs,
            COUNT(*) FILTER (WHERE status = 'succeeded') AS succeeded,
            COUNT(*) FILTER (WHERE status = 'partial') AS partial,
            COUNT(*) FILTER (WHERE status IN ({_quoted(FAILED_OR_TIMED_OUT)})
                             AND NOT tester_fault) AS failed,
            COUNT(*) FILTER (WHERE tester_fault) AS tester_faults,
            array_agg(error_class) FILTER (WHERE error_class IS NOT NULL AND NOT tester_fault)
                AS failure_classes,
            COALESCE(to_jsonb(array_agg(DISTINCT server_version ORDER BY server_version)
                     FILTER (WHERE server_version <> '')), '[]'::jsonb) AS server_versions,
            COALESCE(to_jsonb(array_agg(DISTINCT client_version ORDER BY client_version)
                     FILTER (WHERE client_version <> '')), '[]'::jsonb) AS client_versions,
            {_group_columns()}
        FROM r GROUP BY night, {keys}, group_measured
    ), s AS (
        SELECT g.night, {g_keys}, {_spread_columns()}
        FROM r JOIN g ON {joined}
        WHERE g.group_measured > {SMALL_GROUP}
        GROUP BY g.night, {g_keys}
    )
    INSERT INTO watch_seriesnight ({columns})
    SELECT g.night, {g_keys}, g.runs, g.succeeded, g.partial, g.failed, g.tester_faults,
        {_errors_json()}, {_metrics_json()}, g.server_versions, g.client_versions,
        %(written_at)s
    FROM g LEFT JOIN s ON {joined.replace("r.", "s.")}
    ON CONFLICT ({keys}, night) DO UPDATE SET
        runs = EXCLUDED.runs, succeeded = EXCLUDED.succeeded, partial = EXCLUDED.partial,
        failed = EXCLUDED.failed, tester_faults = EXCLUDED.tester_faults,
        errors = EXCLUDED.errors, metrics = EXCLUDED.metrics,
        server_versions = EXCLUDED.server_versions,
        client_versions = EXCLUDED.client_versions, updated_at = EXCLUDED.updated_at
    """
    with connection.cursor() as cursor:
        # The planner guesses one row out of the grouped CTEs and would join them in a
        # nested loop (quadratic in the night's series: minutes for a fortnight).
        cursor.execute("SET LOCAL enable_nestloop = off")
        # A fortnight's runs sorted in memory rather than in temporary files.
        cursor.execute(f"SET LOCAL work_mem = '{SORT_MEMORY}'")
        cursor.execute(statement, {"start": start, "end": end, "written_at": written_at})
        return int(cursor.rowcount)


def _upsert_in_python(start: datetime, end: datetime, written_at: datetime) -> int:
    """What _upsert_in_database computes, for databases without percentile_cont."""
    runs = Run.objects.filter(created_at__gte=start, created_at__lt=end, status__in=ENDED)
    fields = (
        "created_at",
        *SERIES_FIELDS,
        "status",
        "server_version",
        "client_version",
        "errors",
        *ROLLUP_METRICS,
    )
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in runs.order_by().values(*fields).iterator(chunk_size=2000):
        created = sql.aware_datetime(row["created_at"])
        assert created is not None
        night = created.astimezone(UTC).date()
        groups[(night, *(row[f] for f in SERIES_FIELDS))].append(row)
    nights = [_series_night(key, rows, written_at) for key, rows in groups.items()]
    SeriesNight.objects.bulk_create(
        nights,
        update_conflicts=True,
        unique_fields=[*(f.removesuffix("_id") for f in SERIES_FIELDS), "night"],
        update_fields=[
            "runs",
            "succeeded",
            "partial",
            "failed",
            "tester_faults",
            "errors",
            "metrics",
            "server_versions",
            "client_versions",
            "updated_at",
        ],
    )
    return len(nights)


def _errors(row: dict[str, Any]) -> Any:
    errors = row["errors"]
    return json.loads(errors) if isinstance(errors, str) else errors  # SQLite's raw JSON text


def run_error_class(row: dict[str, Any]) -> str:
    errors = _errors(row)
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    if first.get("class"):
        return str(first["class"])
    return "timeout" if row["status"] == "timeout" else UNRECORDED_CLASS


def _series_night(key: tuple[Any, ...], rows: list[dict[str, Any]], at: datetime) -> SeriesNight:
    night, *series = key
    counts = {"succeeded": 0, "partial": 0, "failed": 0, "tester_faults": 0}
    errors: dict[str, int] = defaultdict(int)
    for row in rows:
        error_class = run_error_class(row)
        status = row["status"]
        tester_fault = status in FAILED_OR_TIMED_OUT and errors_are_tester_fault(_errors(row))
        if tester_fault:
            counts["tester_faults"] += 1
        elif status in FAILED_OR_TIMED_OUT:
            counts["failed"] += 1
        elif status in MEASURED:
            counts[status] += 1
        if status in WITH_FAILURES and not tester_fault:
            errors[error_class] += 1
    measured = [row for row in rows if row["status"] in MEASURED]
    metrics = {}
    for metric in ROLLUP_METRICS:
        values = [v for row in measured if (v := row[metric]) is not None and math.isfinite(v)]
        if values:
            metrics[metric] = distribution(values)
    return SeriesNight(
        night=night,
        **dict(zip(SERIES_FIELDS, series, strict=True)),
        runs=len(rows),
        **counts,
        errors=dict(errors),
        metrics=metrics,
        server_versions=_versions(rows, "server_version"),
        client_versions=_versions(rows, "client_version"),
        updated_at=at,
    )


def _versions(rows: list[dict[str, Any]], column: str) -> list[str]:
    return sorted({row[column] for row in rows if row[column]})


def distribution(values: Sequence[float]) -> dict[str, float | int]:
    """{"median", "q1", "q3", "mad", "n"} of `values` (not empty), as percentile_cont gives."""
    median = percentile_cont(values, 0.5)
    return {
        "median": median,
        "q1": percentile_cont(values, 0.25),
        "q3": percentile_cont(values, 0.75),
        "mad": percentile_cont([abs(v - median) for v in values], 0.5),
        "n": len(values),
    }


def percentile_cont(values: Sequence[float], q: float) -> float:
    """PostgreSQL's percentile_cont over `values` (not empty): linear interpolation."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
