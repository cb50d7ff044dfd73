"""The matrix: the latest value of a metric per vantage point x endpoint (or site x protocol)
for one parameter set, rated by the metric's thresholds (webapp.dashboards.thresholds: saved
by an operator, else the defaults; the query's boundaries override them); its page, where
operators also save thresholds, and its API view.

A cell's value is its pair's latest *measured* run (succeeded or partial); the cell is
marked failed when the pair's latest *ended* run failed or timed out; "last good" is the
latest run that succeeded. Cancelled runs are left out: a cancel is an operator's act, not
the endpoint's. Times are the runs' created_at (the slot a schedule launched them for).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsOperatorOrReadOnly, can_operate, user_role
from webapp.campaigns.models import Run
from webapp.campaigns.selectors import SERIES_METRICS
from webapp.core import sql
from webapp.core.views import ViewerRequiredMixin
from webapp.dashboards.form_schema import form_errors, form_parameters
from webapp.dashboards.parameter_sets import (
    FractionField,
    ParameterSet,
    RecentParameterSet,
    compare_url,
    parameter_set_choose,
    parameter_sets_recent,
)
from webapp.dashboards.thresholds import (
    SAVE_REFUSAL,
    Thresholds,
    matrix_threshold_reset,
    matrix_threshold_save,
    order_error,
    threshold_errors,
    thresholds_in_effect,
)
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.params import MAX_CLIENTS, MAX_READ_SIZE, Method, Pattern
from workers.engine.units import format_size

ENDPOINTS = "endpoint"
SITES = "site-protocol"
VIEWS = [(ENDPOINTS, "endpoints x vantage points"), (SITES, "sites x protocols")]
DEFAULT_METRIC = "throughput_mbps"
ENDED = (Run.Status.SUCCEEDED, Run.Status.PARTIAL, Run.Status.FAILED, Run.Status.TIMEOUT)
MEASURED = (Run.Status.SUCCEEDED, Run.Status.PARTIAL)
FAILED = (Run.Status.FAILED, Run.Status.TIMEOUT)
ERROR_MESSAGE_CHARS = 300
OVERRIDE_HELP = "in the metric's unit; empty: its saved (or default) threshold"


class MatrixForm(forms.Form):
    """The matrix's controls; the page and the API read the same query parameters."""

    metric = forms.ChoiceField(
        choices=[(m, f"{m} ({unit})") for m, unit in SERIES_METRICS.items()], required=False
    )
    good = forms.FloatField(help_text=OVERRIDE_HELP)
    bad = forms.FloatField(help_text=OVERRIDE_HELP)
    view = forms.ChoiceField(choices=VIEWS, required=False)
    method = forms.ChoiceField(choices=[("", "most common")] + [(m, m) for m in Method])
    pattern = forms.ChoiceField(choices=[("", "most common")] + [(p, p) for p in Pattern])
    read_size = forms.IntegerField(
        min_value=1, max_value=MAX_READ_SIZE, help_text="in bytes in the URL"
    )
    fraction = FractionField(help_text="of the file, in (0, 1]")
    clients = forms.IntegerField(min_value=1, max_value=MAX_CLIENTS)
    site = forms.ModelChoiceField(Site.objects.order_by("name"), empty_label="all sites")
    protocol = forms.ChoiceField(choices=[("", "all protocols"), *Endpoint.Protocol.choices])
    vantage_point = forms.ModelChoiceField(
        VantagePoint.objects.order_by("name"), to_field_name="name", empty_label="all"
    )

    def __init__(
        self, *args: Any, recent: Sequence[RecentParameterSet] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
        self._offer_recent_values(recent)

    def _offer_recent_values(self, recent: Sequence[RecentParameterSet]) -> None:
        """read_size, fraction and clients are numbers (any may be asked for), offered as
        the values of recent parameter sets plus the one in the query."""
        labels: dict[str, Callable[[Any], str]] = {
            "read_size": format_size,
            "fraction": lambda v: f"{v:g}",
            "clients": str,
        }
        for name, label in labels.items():
            values = {getattr(r.parameter_set, name) for r in recent}
            asked = self.data.get(name) if self.is_bound else None
            choices = [("", "most common")] + [(v, label(v)) for v in sorted(values)]
            if asked and asked not in {str(v) for v in values}:
                choices.append((asked, asked))
            self.fields[name].widget = forms.Select(choices=choices)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        metric = data.get("metric") or DEFAULT_METRIC
        good, bad = data.get("good"), data.get("bad")
        if (good is None) != (bad is None):
            missing = "bad" if bad is None else "good"
            self.add_error(missing, "give both good and bad boundaries, or neither")
        elif good is not None and bad is not None:
            error = order_error(metric=metric, good=good, bad=bad)
            if error:
                self.add_error("bad", error)
        return data


def _suggest(values: list[float], higher_is_better: bool) -> dict[str, float] | None:
    """Terciles of the values drawn: a starting point for the operator's boundaries."""
    if len(values) < 2:
        return None
    low, high = statistics.quantiles(values, n=3)
    good, bad = (high, low) if higher_is_better else (low, high)
    return {"good": float(f"{good:.3g}"), "bad": float(f"{bad:.3g}")}


def matrix_data(
    *, query: dict[str, Any], recent: list[RecentParameterSet] | None = None
) -> dict[str, Any]:
    """The matrix for a MatrixForm's cleaned data: two queries (the recent parameter sets,
    unless given, and the cells), whatever the size of the grid, and one for the metric's
    saved thresholds unless the query gives boundaries."""
    recent = parameter_sets_recent() if recent is None else recent
    metric = query.get("metric") or DEFAULT_METRIC
    view = query.get("view") or ENDPOINTS
    thresholds = thresholds_in_effect(metric=metric, good=query.get("good"), bad=query.get("bad"))
    parameter_set = parameter_set_choose(given=query, recent=recent)
    cells: list[dict[str, Any]] = []
    if parameter_set is not None:
        cells = matrix_cells(
            metric=metric,
            parameter_set=parameter_set,
            site_id=query["site"].pk if query.get("site") else None,
            protocol=query.get("protocol") or None,
            vantage_point=query["vantage_point"].name if query.get("vantage_point") else None,
        )
    for cell in cells:
        cell["rating"] = thresholds.rate(cell["value"])
    if view == SITES:
        cells = _site_protocol_cells(cells, thresholds, metric, parameter_set)
    values = [c["value"] for c in cells if c["value"] is not None]
    return {
        "metric": metric,
        "unit": SERIES_METRICS[metric],
        "higher_is_better": thresholds.higher_is_better,
        "view": view,
        "parameter_set": _parameter_set_json(parameter_set),
        "parameter_sets": [
            {**r.parameter_set.query(), "label": r.parameter_set.label, "runs": r.runs}
            for r in recent[:20]
        ],
        "thresholds": thresholds.as_json(),
        "suggested": _suggest(values, thresholds.higher_is_better),
        **_axes(cells, view),
        "cells": cells,
    }


def _parameter_set_json(parameter_set: ParameterSet | None) -> dict[str, Any] | None:
    if parameter_set is None:
        return None
    return {**parameter_set.query(), "label": parameter_set.label}


def _axes(cells: list[dict[str, Any]], view: str) -> dict[str, list[dict[str, Any]]]:
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
    vantage_points = sorted({c["vantage_point"] for c in cells})
    endpoints = {
        c["endpoint"]: {k: c[k] for k in ("endpoint", "endpoint_name", "site", "site_name")}
        | {"protocol": c["protocol"]}
        for c in cells
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
) -> list[dict[str, Any]]:
    """Per (vantage point, endpoint) that has an ended run of the parameter set: the latest
    ended run, the latest measured value of `metric` and when the last good run was. One
    query: each pair's latest rows are found by index probes, so the cost grows with the
    pairs, not with the history."""
    if metric not in SERIES_METRICS:
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


_SAME_GROUP = (
    "r.vantage_point_id = vp.id AND r.endpoint_id = e.id AND r.method = %(method)s"
    " AND r.pattern = %(pattern)s AND r.read_size = %(read_size)s"
    " AND r.fraction = %(fraction)s AND r.clients = %(clients)s"
)


def _cells_sql_lateral(metric: str, pair_filter: str) -> str:
    """LATERAL probes, one per status: with the parameter set and status fixed, the runs
    index (endpoint, parameter set, status, created_at; run_compare_idx) hands over each
    status's latest run first, and the latest of those is the pair's latest (an IN list of
    statuses would read the pair's whole history to sort it)."""
    run = Run._meta.db_table

    def latest(statuses: tuple[str, ...], columns: str, extra: str = "") -> str:
        probes = " UNION ALL ".join(
            f"(SELECT {columns} FROM {run} r WHERE {_SAME_GROUP} AND r.status = '{status}'"
            f"{extra} ORDER BY r.created_at DESC, r.id DESC LIMIT 1)"
            for status in statuses
        )
        return f"SELECT * FROM ({probes}) x ORDER BY x.created_at DESC, x.id DESC LIMIT 1"

    error_class, error_message = _first_error_sql("r")
    ended = (
        f"r.id, r.status, r.created_at, {error_class} AS error_class,"
        f" {error_message} AS error_message"
    )
    measured = f"r.id, r.status, r.created_at, r.{metric} AS value"
    _in(ENDED + MEASURED)  # checks the statuses are our own words
    return f"""
        SELECT vp.name AS vantage_point, e.id AS endpoint, e.name AS endpoint_name,
               e.protocol AS protocol, s.id AS site, s.name AS site_name,
               l.id AS last_run, l.status AS last_status, l.created_at AS last_at,
               l.error_class, l.error_message,
               m.id AS value_run, m.status AS value_status, m.created_at AS value_at,
               m.value, g.created_at AS last_good_at
        FROM {VantagePoint._meta.db_table} vp
        CROSS JOIN {Endpoint._meta.db_table} e
        JOIN {Site._meta.db_table} s ON s.id = e.site_id
        CROSS JOIN LATERAL ({latest(ENDED, ended)}) l
        LEFT JOIN LATERAL (
            {latest(MEASURED, measured, f" AND r.{metric} IS NOT NULL")}
        ) m ON true
        LEFT JOIN LATERAL ({latest((Run.Status.SUCCEEDED,), "r.id, r.created_at")}) g ON true
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
                (SELECT r.id FROM {run} r WHERE {same} AND r.status IN {_in(ENDED)}
                 ORDER BY r.created_at DESC, r.id DESC LIMIT 1) AS last_id,
                (SELECT r.id FROM {run} r WHERE {same} AND r.status IN {_in(MEASURED)}
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
) -> dict[str, Any]:
    for key in ("last_at", "value_at", "last_good_at"):
        row[key] = sql.aware_datetime(row[key])
    good_at = row["last_good_at"]
    row["since_good_s"] = None if good_at is None else round((now - good_at).total_seconds())
    row["failed"] = row["last_status"] in FAILED
    query = {"endpoint": row["endpoint"], "vantage_point": row["vantage_point"]}
    row["compare_url"] = compare_url(query, metric, parameter_set)
    return row


def _site_protocol_cells(
    cells: list[dict[str, Any]],
    thresholds: Thresholds,
    metric: str,
    parameter_set: ParameterSet | None,
) -> list[dict[str, Any]]:
    """The endpoint cells pooled per (site, protocol): the median of their latest values,
    how many failed last, and the stalest "last good" (None if one never had a good run)."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for cell in cells:
        groups[(cell["site"], cell["protocol"])].append(cell)
    pooled = []
    for (site, protocol), members in groups.items():
        values = [c["value"] for c in members if c["value"] is not None]
        value = statistics.median(values) if values else None
        good = [c["last_good_at"] for c in members]
        stalest = None if None in good else min(good)
        since = [c["since_good_s"] for c in members]
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
                "last_good_at": stalest,
                "since_good_s": None if None in since else max(since),
                "rating": thresholds.rate(value),
                "compare_url": compare_url(
                    {"site": site, "protocol": protocol}, metric, parameter_set
                ),
            }
        )
    return sorted(pooled, key=lambda c: (c["site_name"], c["protocol"]))


def matrix_grid(data: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any] | None]]]:
    """The cells laid out as the table draws them: per row, one cell (or None) per column."""
    if data["view"] == SITES:
        row_key, column_key = "site", "protocol"
    else:
        row_key, column_key = "endpoint", "vantage_point"
    by_position = {(c[row_key], c[column_key]): c for c in data["cells"]}
    return [
        (row, [by_position.get((row[row_key], col[column_key])) for col in data["columns"]])
        for row in data["rows"]
    ]


class ThresholdForm(forms.Form):
    """The page's form that saves a metric's thresholds for everyone, or resets them."""

    metric = forms.ChoiceField(choices=[(m, m) for m in SERIES_METRICS])
    good = forms.FloatField(required=False)
    bad = forms.FloatField(required=False)
    reset = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("reset") or "metric" not in data:
            return data
        good, bad = data.get("good"), data.get("bad")
        for name, value in (("good", good), ("bad", bad)):
            if value is None and name not in self.errors:
                self.add_error(name, "needed to save the thresholds")
        if good is not None and bad is not None:
            errors = threshold_errors(metric=data["metric"], good=good, bad=bad)
            for name, messages in errors.items():
                self.add_error(name, messages)
        return data


class MatrixView(ViewerRequiredMixin, View):
    """GET draws the matrix; POST (operators and admins) saves the metric's thresholds for
    everyone, or resets them, and shows the matrix again coloured by them."""

    template_name = "dashboards/matrix.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, ThresholdForm(prefix="thresholds"))

    def post(self, request: HttpRequest) -> HttpResponse:
        if not can_operate(request.user):
            raise PermissionDenied(f"{SAVE_REFUSAL}: you are a {user_role(request.user)}")
        saving = ThresholdForm(request.POST, prefix="thresholds")
        if not saving.is_valid():
            return self._page(request, saving, status=400)
        metric = saving.cleaned_data["metric"]
        if saving.cleaned_data["reset"]:
            matrix_threshold_reset(metric=metric)
        else:
            good, bad = saving.cleaned_data["good"], saving.cleaned_data["bad"]
            matrix_threshold_save(metric=metric, good=good, bad=bad, user=request.user)
        # Back to the same view, coloured by what was saved: the address's boundaries go.
        query = request.GET.copy()
        for name in ("good", "bad"):
            query.pop(name, None)
        query["metric"] = metric
        return redirect(f"{reverse('dashboards:matrix')}?{query.urlencode()}")

    def _page(self, request: HttpRequest, saving: ThresholdForm, status: int = 200) -> HttpResponse:
        recent = parameter_sets_recent()
        form = MatrixForm(request.GET, recent=recent)
        context: dict[str, Any] = {"form": form, "data": None, "saving": saving}
        if not form.is_valid():
            return render(request, self.template_name, context, status=400)
        data = matrix_data(query=form.cleaned_data, recent=recent)
        if not saving.is_bound:
            good, bad = data["thresholds"]["good"], data["thresholds"]["bad"]
            saving.initial = {"metric": data["metric"], "good": f"{good:g}", "bad": f"{bad:g}"}
        context.update(
            data=data,
            grid=matrix_grid(data),
            any_runs=bool(recent),
            can_save=can_operate(request.user),
        )
        return render(request, self.template_name, context, status=status)


class MatrixAPIView(APIView):
    """The latest value of a metric per vantage point x endpoint (or site x protocol) for one
    parameter set (default: the most common lately), rated by the good/bad boundaries."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        parameters=form_parameters(MatrixForm),
        responses={
            200: OpenApiResponse(description="the matrix: axes, cells and thresholds"),
            400: OpenApiResponse(description="{field: [message]} for each bad parameter"),
        },
    )
    def get(self, request: Request) -> Response:
        recent = parameter_sets_recent()
        form = MatrixForm(request.query_params, recent=recent)
        if not form.is_valid():
            return Response(form_errors(form), status=400)
        return Response(matrix_data(query=form.cleaned_data, recent=recent))
