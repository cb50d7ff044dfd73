"""The matrix: the latest value of a metric per vantage point x endpoint (or site x protocol)
for one parameter set, rated by the metric's thresholds (selectors.thresholds: saved by an
operator, else the defaults; the query's boundaries override them). The page and its API
view (views.MatrixView, api.MatrixAPIView) read it with the same form (forms.MatrixForm).

A cell's value is its pair's latest *measured* run (succeeded or partial); the cell is
marked failed when the pair's latest *ended* run failed or timed out; "last good" is the
latest run that succeeded. Cancelled runs are left out: a cancel is an operator's act, not
the endpoint's. Times are the runs' created_at (the slot a schedule launched them for).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict, cast

from django.db import connection
from django.utils import timezone

from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Run, sql_tester_fault
from webapp.core import sql
from webapp.dashboards.selectors.parameter_sets import (
    ParameterSet,
    ParameterSetJSON,
    RecentParameterSet,
    compare_url,
    parameter_set_choose,
    parameter_set_json,
    parameter_sets_recent,
)
from webapp.dashboards.selectors.thresholds import Thresholds, ThresholdsJSON, thresholds_in_effect
from webapp.sites.models import Endpoint, Site, VantagePoint

ENDPOINTS = "endpoint"
SITES = "site-protocol"
VIEWS = [(ENDPOINTS, "endpoints x vantage points"), (SITES, "sites x protocols")]
DEFAULT_METRIC = "throughput_mbps"
ERROR_MESSAGE_CHARS = 300


class EndpointCell(TypedDict):
    """A vantage point x endpoint cell: the pair's latest ended run, its latest measured
    value and when it last succeeded."""

    vantage_point: str
    endpoint: int
    endpoint_name: str
    protocol: str
    site: int
    site_name: str
    last_run: int
    last_status: str
    last_at: datetime
    error_class: str | None
    error_message: str | None
    value_run: int | None
    value_status: str | None
    value_at: datetime | None
    value: float | None
    last_good_at: datetime | None
    since_good_s: int | None
    failed: bool  # the latest ended run failed or timed out
    compare_url: str
    rating: NotRequired[str | None]  # by the thresholds in effect (matrix_data)


class SiteProtocolCell(TypedDict):
    """A site x protocol cell: its endpoint cells pooled."""

    site: int
    site_name: str
    protocol: str
    value: float | None  # the median of the endpoints' latest values
    pairs: int
    measured: int
    failed_pairs: int
    failed: bool
    last_good_at: datetime | None  # the stalest (None if one never succeeded)
    since_good_s: int | None
    rating: str | None
    compare_url: str


class MatrixData(TypedDict):
    """The matrix as the page draws it and the API answers it."""

    metric: str
    unit: str
    higher_is_better: bool
    view: str  # ENDPOINTS or SITES
    parameter_set: ParameterSetJSON | None  # the one drawn (None: no runs yet)
    parameter_sets: list[dict[str, Any]]  # the recent ones, with their runs
    thresholds: ThresholdsJSON
    suggested: dict[str, float] | None  # good and bad boundaries drawn from the values
    columns: list[dict[str, str]]  # {"vantage_point": ...} or {"protocol": ...}
    rows: list[dict[str, Any]]  # an endpoint with its site, or a site
    cells: list[EndpointCell] | list[SiteProtocolCell]


def _suggest(values: list[float], higher_is_better: bool) -> dict[str, float] | None:
    """Terciles of the values drawn: a starting point for the operator's boundaries."""
    if len(values) < 2:
        return None
    low, high = statistics.quantiles(values, n=3)
    good, bad = (high, low) if higher_is_better else (low, high)
    return {"good": float(f"{good:.3g}"), "bad": float(f"{bad:.3g}")}


def matrix_data(
    *, query: dict[str, Any], recent: list[RecentParameterSet] | None = None
) -> MatrixData:
    """The matrix for a MatrixForm's cleaned data: two queries (the recent parameter sets,
    unless given, and the cells), whatever the size of the grid, and one for the metric's
    saved thresholds unless the query gives boundaries."""
    recent = parameter_sets_recent() if recent is None else recent
    metric = query.get("metric") or DEFAULT_METRIC
    view = query.get("view") or ENDPOINTS
    thresholds = thresholds_in_effect(metric=metric, good=query.get("good"), bad=query.get("bad"))
    parameter_set = parameter_set_choose(given=query, recent=recent)
    endpoint_cells: list[EndpointCell] = []
    if parameter_set is not None:
        endpoint_cells = matrix_cells(
            metric=metric,
            parameter_set=parameter_set,
            site_id=query["site"].pk if query.get("site") else None,
            protocol=query.get("protocol") or None,
            vantage_point=query["vantage_point"].name if query.get("vantage_point") else None,
        )
    for cell in endpoint_cells:
        cell["rating"] = thresholds.rate(cell["value"])
    cells: list[EndpointCell] | list[SiteProtocolCell] = endpoint_cells
    if view == SITES:
        cells = _site_protocol_cells(endpoint_cells, thresholds, metric, parameter_set)
    values = [c["value"] for c in cells if c["value"] is not None]
    axes = _axes(cells, view)
    return {
        "metric": metric,
        "unit": METRICS[metric].unit,
        "higher_is_better": thresholds.higher_is_better,
        "view": view,
        "parameter_set": parameter_set_json(parameter_set),
        "parameter_sets": [
            {**r.parameter_set.query(), "label": r.parameter_set.label, "runs": r.runs}
            for r in recent[:20]
        ],
        "thresholds": thresholds.as_json(),
        "suggested": _suggest(values, thresholds.higher_is_better),
        "columns": axes["columns"],
        "rows": axes["rows"],
        "cells": cells,
    }


class Axes(TypedDict):
    columns: list[dict[str, str]]
    rows: list[dict[str, Any]]


def _axes(cells: Sequence[EndpointCell | SiteProtocolCell], view: str) -> Axes:
    """The grid's columns and rows: those with at least one cell, in name order."""
    if view == SITES:
        columns = sorted({c["protocol"] for c in cells})
        rows = {c["site"]: c["site_name"] for c in cells}
        return {
            "columns": [{"protocol": p} for p in columns],
            "rows": [
                {"site": s, "site_name": n} for s, n in sorted(rows.items(), key=lambda r: r[1])
            ],
        }
    pairs = cast(Sequence[EndpointCell], cells)
    vantage_points = sorted({c["vantage_point"] for c in pairs})
    endpoints = {
        c["endpoint"]: {
            "endpoint": c["endpoint"],
            "endpoint_name": c["endpoint_name"],
            "site": c["site"],
            "site_name": c["site_name"],
            "protocol": c["protocol"],
        }
        for c in pairs
    }
    return {
        "columns": [{"vantage_point": v} for v in vantage_points],
        "rows": sorted(endpoints.values(), key=lambda r: (r["site_name"], r["endpoint_name"])),
    }


def matrix_cells(
    *,
    metric: str,
    parameter_set: ParameterSet,
    site_id: int | None = None,
    protocol: str | None = None,
    vantage_point: str | None = None,
) -> list[EndpointCell]:
    """Per (vantage point, endpoint) that has an ended run of the parameter set: the latest
    ended run, the latest measured value of `metric` and when the last good run was. One
    query: each pair's latest rows are found by index probes, so the cost grows with the
    pairs, not with the history."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    params: dict[str, Any] = dict(parameter_set.query())
    where = []
    for column, value in (
        ("e.site_id", site_id),
        ("e.protocol", protocol),
        ("vp.name", vantage_point),
    ):
        if value is not None:
            name = column.split(".")[1]
            where.append(f"{column} = %({name})s")
            params[name] = value
    sql = _cells_sql(metric, " AND ".join(where) or "1 = 1")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = [c[0] for c in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    now = timezone.now()
    return [_cell(row, metric, parameter_set, now) for row in rows]


def _in(statuses: tuple[str, ...]) -> str:
    # Our own status constants (lowercase words), not user input.
    assert all(s.isalpha() for s in statuses)
    return "(" + ", ".join(f"'{s}'" for s in statuses) + ")"


def _first_error_sql(run: str) -> tuple[str, str]:
    """The first error's class and message (cut short) of the run aliased `run`."""
    return (
        sql.json_first(f"{run}.errors", "class"),
        sql.left(sql.json_first(f"{run}.errors", "message"), ERROR_MESSAGE_CHARS),
    )


def _cells_sql(metric: str, pair_filter: str) -> str:
    if sql.has_lateral():
        return _cells_sql_lateral(metric, pair_filter)
    return _cells_sql_portable(metric, pair_filter)


_SAME_GROUP = " AND ".join(
    ["r.vantage_point_id = vp.id", "r.endpoint_id = e.id"]
    + [f"r.{name} = %({name})s" for name in PARAMETER_SET_FIELDS]
)


# A cell's latest run is the endpoint's own: a tester fault (lost, harness, egress, an expired
# credential) never makes a cell fail, nor shows as its latest.
def _endpoints_own() -> str:
    return f" AND NOT {sql_tester_fault('r.errors')}"


def _cells_sql_lateral(metric: str, pair_filter: str) -> str:
    """LATERAL probes, one per ended status: with the parameter set and status fixed, the runs
    index (endpoint, parameter set, status, created_at; run_compare_idx) hands over each
    status's latest run first (an IN list of statuses would read the pair's whole history to
    sort it). The latest succeeded run is also the last good one and, with its figure, the
    latest measured; the pair's latest ended run is the latest of the four. Where a probe's
    run does not serve (a figure missing, a tester fault: rare), a further probe looks past
    it; it runs only then (its condition is on the outer row: PostgreSQL tests it once)."""
    run = Run._meta.db_table
    error_class, error_message = _first_error_sql("r")
    tester = sql_tester_fault("r.errors")
    columns = (
        f"r.id, r.status, r.created_at, r.{metric} AS value, {error_class} AS error_class,"
        f" {error_message} AS error_message, {tester} AS tester"
    )

    def probe(alias: str, status: str, extra: str = "", only_if: str = "") -> str:
        gate = f" AND ({only_if})" if only_if else ""
        return (
            f"LEFT JOIN LATERAL (SELECT {columns} FROM {run} r WHERE {_SAME_GROUP}"
            f" AND r.status = '{status}'{extra}{gate}"
            f" ORDER BY r.created_at DESC, r.id DESC LIMIT 1) {alias} ON true"
        )

    def latest(candidates: list[str], fields: str) -> str:
        rows = ", ".join(f"({c})" for c in candidates)
        return (
            f"SELECT * FROM (VALUES {rows}) c({fields}) WHERE c.id IS NOT NULL"
            " ORDER BY c.created_at DESC, c.id DESC LIMIT 1"
        )

    own, measured = f" AND NOT {tester}", f" AND r.{metric} IS NOT NULL"
    succeeded, partial = Run.Status.SUCCEEDED.value, Run.Status.PARTIAL.value
    # A status added to ENDED needs a probe of its own here.
    assert set(Run.Status.ENDED) == {succeeded, partial, Run.Status.FAILED, Run.Status.TIMEOUT}
    probes = [
        probe("su", succeeded),
        probe("pa", partial),
        probe("fa", Run.Status.FAILED.value, own),
        probe("ti", Run.Status.TIMEOUT.value, own),
        # Past a succeeded or partial run that is a tester fault, or has no figure.
        probe("su_own", succeeded, own, "su.tester"),
        probe("pa_own", partial, own, "pa.tester"),
        probe("su_value", succeeded, measured, "su.id IS NOT NULL AND su.value IS NULL"),
        probe("pa_value", partial, measured, "pa.id IS NOT NULL AND pa.value IS NULL"),
    ]

    def ended(alias: str, run_id: str = "") -> str:
        return (
            f"{run_id or alias + '.id'}, {alias}.status, {alias}.created_at,"
            f" {alias}.error_class, {alias}.error_message"
        )

    last = latest(
        [
            ended("su", "CASE WHEN su.tester THEN NULL ELSE su.id END"),
            ended("su_own"),
            ended("pa", "CASE WHEN pa.tester THEN NULL ELSE pa.id END"),
            ended("pa_own"),
            ended("fa"),
            ended("ti"),
        ],
        "id, status, created_at, error_class, error_message",
    )
    value_fields = "id, status, created_at, value"
    value_rows = [
        f"CASE WHEN {a}.value IS NULL THEN NULL ELSE {a}.id END, {a}.status, {a}.created_at,"
        f" {a}.value"
        for a in ("su", "pa")
    ] + [f"{a}.id, {a}.status, {a}.created_at, {a}.value" for a in ("su_value", "pa_value")]
    value = latest(value_rows, value_fields)
    _in(Run.Status.ENDED + Run.Status.MEASURED)  # checks the statuses are our own words
    joins = "\n        ".join(probes)
    return f"""
        SELECT vp.name AS vantage_point, e.id AS endpoint, e.name AS endpoint_name,
               e.protocol AS protocol, s.id AS site, s.name AS site_name,
               l.id AS last_run, l.status AS last_status, l.created_at AS last_at,
               l.error_class, l.error_message,
               m.id AS value_run, m.status AS value_status, m.created_at AS value_at,
               m.value, su.created_at AS last_good_at
        FROM {VantagePoint._meta.db_table} vp
        CROSS JOIN {Endpoint._meta.db_table} e
        JOIN {Site._meta.db_table} s ON s.id = e.site_id
        {joins}
        CROSS JOIN LATERAL ({last}) l
        LEFT JOIN LATERAL ({value}) m ON true
        WHERE {pair_filter}
        ORDER BY s.name, e.name, vp.name
    """


def _cells_sql_portable(metric: str, pair_filter: str) -> str:
    """Correlated subqueries (SQLite has no LATERAL): the same answer, read less directly."""
    run = Run._meta.db_table
    same = _SAME_GROUP
    error_class, error_message = _first_error_sql("l")
    return f"""
        SELECT vp.name AS vantage_point, e.id AS endpoint, e.name AS endpoint_name,
               e.protocol AS protocol, s.id AS site, s.name AS site_name,
               l.id AS last_run, l.status AS last_status, l.created_at AS last_at,
               {error_class} AS error_class, {error_message} AS error_message,
               m.id AS value_run, m.status AS value_status, m.created_at AS value_at,
               m.{metric} AS value, p.good_at AS last_good_at
        FROM (
            SELECT vp.id AS vantage_point_id, e.id AS endpoint_id,
                (SELECT r.id FROM {run} r WHERE {same} AND r.status IN {_in(Run.Status.ENDED)}
                 {_endpoints_own()} ORDER BY r.created_at DESC, r.id DESC LIMIT 1) AS last_id,
                (SELECT r.id FROM {run} r WHERE {same} AND r.status IN {_in(Run.Status.MEASURED)}
                 AND r.{metric} IS NOT NULL
                 ORDER BY r.created_at DESC, r.id DESC LIMIT 1) AS measured_id,
                (SELECT MAX(r.created_at) FROM {run} r WHERE {same}
                 AND r.status = '{Run.Status.SUCCEEDED.value}') AS good_at
            FROM {VantagePoint._meta.db_table} vp CROSS JOIN {Endpoint._meta.db_table} e
            WHERE {pair_filter}
        ) p
        JOIN {VantagePoint._meta.db_table} vp ON vp.id = p.vantage_point_id
        JOIN {Endpoint._meta.db_table} e ON e.id = p.endpoint_id
        JOIN {Site._meta.db_table} s ON s.id = e.site_id
        JOIN {run} l ON l.id = p.last_id
        LEFT JOIN {run} m ON m.id = p.measured_id
        ORDER BY s.name, e.name, vp.name
    """


def _cell(
    row: dict[str, Any], metric: str, parameter_set: ParameterSet, now: datetime
) -> EndpointCell:
    for key in ("last_at", "value_at", "last_good_at"):
        row[key] = sql.aware_datetime(row[key])
    good_at = row["last_good_at"]
    row["since_good_s"] = None if good_at is None else round((now - good_at).total_seconds())
    row["failed"] = row["last_status"] in Run.Status.FAILED_OR_TIMED_OUT
    query = {"endpoint": row["endpoint"], "vantage_point": row["vantage_point"]}
    row["compare_url"] = compare_url(query, metric, parameter_set)
    return cast(EndpointCell, row)  # the query's columns, with the fields above


def _site_protocol_cells(
    cells: list[EndpointCell],
    thresholds: Thresholds,
    metric: str,
    parameter_set: ParameterSet | None,
) -> list[SiteProtocolCell]:
    """The endpoint cells pooled per (site, protocol): the median of their latest values,
    how many failed last, and the stalest "last good" (None if one never had a good run)."""
    groups: dict[tuple[int, str], list[EndpointCell]] = defaultdict(list)
    for cell in cells:
        groups[(cell["site"], cell["protocol"])].append(cell)
    pooled: list[SiteProtocolCell] = []
    for (site, protocol), members in groups.items():
        values = [c["value"] for c in members if c["value"] is not None]
        value = statistics.median(values) if values else None
        good = [c["last_good_at"] for c in members if c["last_good_at"] is not None]
        since = [c["since_good_s"] for c in members if c["since_good_s"] is not None]
        all_good = len(good) == len(members)
        pooled.append(
            {
                "site": site,
                "site_name": members[0]["site_name"],
                "protocol": protocol,
                "value": value,
                "pairs": len(members),
                "measured": len(values),
                "failed_pairs": sum(c["failed"] for c in members),
                "failed": any(c["failed"] for c in members),
                "last_good_at": min(good) if all_good else None,
                "since_good_s": max(since) if len(since) == len(members) else None,
                "rating": thresholds.rate(value),
                "compare_url": compare_url(
                    {"site": site, "protocol": protocol}, metric, parameter_set
                ),
            }
        )
    return sorted(pooled, key=lambda c: (c["site_name"], c["protocol"]))


def matrix_grid(
    data: MatrixData,
) -> list[tuple[dict[str, Any], list[EndpointCell | SiteProtocolCell | None]]]:
    """The cells laid out as the table draws them: per row, one cell (or None) per column."""
    if data["view"] == SITES:
        row_key, column_key = "site", "protocol"
    else:
        row_key, column_key = "endpoint", "vantage_point"
    by_position: dict[tuple[Any, Any], EndpointCell | SiteProtocolCell] = {}
    for cell in data["cells"]:
        position = cast(Mapping[str, Any], cell)
        by_position[(position[row_key], position[column_key])] = cell
    return [
        (row, [by_position.get((row[row_key], col[column_key])) for col in data["columns"]])
        for row in data["rows"]
    ]
