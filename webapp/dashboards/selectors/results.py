"""Campaign results: the papers' figures, read from one campaign's runs.

Every chart of the results page (and /api/v1/campaigns/{id}/results/) draws from these reads:

- `cells`: per parameter set (endpoint, vantage point and every run parameter) the medians
  over repetitions of the measured runs' aggregates, computed in PostgreSQL with
  percentile_cont (in Python on SQLite, the embedded default);
- `crossovers`: per parameter set without method and fraction, where copying the file first
  becomes faster than reading it directly (interpolated between the measured fractions);
- `failures`: final runs that did not fully succeed, per endpoint, vantage point, operation,
  method, status and the class of their first error (cancelled runs count here, and only here);
- `not_asked`: the charts whose question the campaign does not ask (results_guidance);
- `operations`: the operations the campaign asks for or its runs measured, each of which
  has charts of its own (the read charts draw reads only; results_guidance.OPERATION_CHARTS).

Four queries whatever the number of runs (cells, failures, endpoint names, and how many
endpoints the campaign reads).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypedDict

from django.db.models import Case, Count, F, FloatField, Q, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, NullIf

from webapp.advice.crossings import crossings as find_crossings
from webapp.advice.crossings import percent as _percent
from webapp.campaigns.models import (
    PARAMETER_SET_FIELDS,
    RUN_PARAMETERS,
    Campaign,
    Run,
    q_tester_fault,
)
from webapp.campaigns.selectors import Percentile, percentile
from webapp.core import sql
from webapp.dashboards.selectors.results_guidance import (
    CROSSOVER_METHODS,
    charts_not_asked,
    latency_order,
    operation_charts,
    results_guidance,
    results_operations,
    still_to_come,
)
from webapp.sites.models import Endpoint
from workers.engine.params import Method, Operation

# What makes two runs repetitions of one another: where, from where, and every parameter
# but the deadline (a limit on the run, not a way of reading).
DIMENSIONS = (
    "endpoint",
    "vantage_point",
    *(p.name for p in RUN_PARAMETERS if p.name != "deadline_s"),
)
# Medians over repetitions (run columns, and the clients' median throughput of the run JSON;
# a write's throughput_mbps is its bytes written over its create..commit span; a storm's
# ops_per_s its operations over their span; a copy's rate and time to start, its tpc's).
METRICS = (
    "wall_s",
    "open_s",
    "ttfb_s",
    "throughput_mbps",
    "client_throughput_mbps",
    "bytes_requested",
    "bytes_read",
    "bytes_wire",
    "preflight_rtt_ms",
    "ops_per_s",
    "tpc_rate_mbps",
    "tpc_start_s",
)
# Metrics of the run JSON (Run.result), not of its columns: their annotation names, and
# their path in the run JSON.
RESULT_METRICS = {
    "client_throughput_mbps": "client_throughput",
    "preflight_rtt_ms": "preflight_rtt",
    "ops_per_s": "ops_rate",
    "tpc_rate_mbps": "tpc_rate",
    "tpc_start_s": "tpc_start",
}
RESULT_PATHS = {"tpc_rate_mbps": "tpc__rate_mbps", "tpc_start_s": "tpc__start_s"}
# The spread of the time to read, drawn as error bars.
SPREAD = {"wall_s_p25": 0.25, "wall_s_p75": 0.75}
# The dimensions a crossover is found across (the rest fix one comparison).
CROSSOVER_ACROSS = ("method", "fraction")


# A cell: its DIMENSIONS, "runs", the medians of METRICS and the SPREAD. Its keys follow
# RUN_PARAMETERS, so it stays a dict rather than a TypedDict listing every parameter again.
ResultsCell = dict[str, Any]


class FailureJSON(TypedDict):
    """Final runs that did not fully succeed, of one endpoint, vantage point, operation,
    method, status and first error class, out of that endpoint, vantage point, operation and
    method's."""

    endpoint: int
    vantage_point: str
    operation: str
    method: str
    status: str
    error_class: str  # "tester fault: <class>" for the tester's own (never the endpoint's)
    tester_fault: bool
    runs: int
    of_runs: int


class EndpointLabel(TypedDict):
    id: int
    name: str
    site: str
    protocol: str
    role: str
    credential_kind: str  # how its door is passed: none, token, oauth-client, x509-proxy


@dataclass(frozen=True)
class ResultsFilter:
    """Which of a campaign's runs to read: empty lists read all (the API's query names)."""

    endpoint: Sequence[int] = ()
    vantage_point: Sequence[str] = ()
    operation: Sequence[str] = ()
    method: Sequence[str] = ()
    pattern: Sequence[str] = ()
    read_size: Sequence[int] = ()
    fraction: Sequence[float] = ()
    clients: Sequence[int] = ()
    address_family: Sequence[str] = ()
    since: date | None = None
    until: date | None = None

    def q(self) -> Q:
        """The filter on Run rows; `until` includes its whole day (UTC)."""
        query = Q()
        for name in ("endpoint", *PARAMETER_SET_FIELDS):
            values = getattr(self, name)
            if values:
                query &= Q(**{f"{name}__in": list(values)})
        if self.vantage_point:
            query &= Q(vantage_point__name__in=list(self.vantage_point))
        if self.since is not None:
            query &= Q(created_at__gte=_day_start(self.since))
        if self.until is not None:
            query &= Q(created_at__lt=_day_start(self.until + timedelta(days=1)))
        return query


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


@dataclass(frozen=True)
class Crossover:
    """Where reading directly and copying first take as long, for one parameter set."""

    key: dict[str, Any]
    fraction: float | None
    kind: str  # crossover | copy-faster | direct-faster | no-difference | too-few-fractions
    text: str
    crossings: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.key,
            "crossover_fraction": self.fraction,
            "kind": self.kind,
            "text": self.text,
            "crossings": self.crossings,
        }


@dataclass(frozen=True)
class CampaignResults:
    """Everything the results page draws, as it goes to the page and the API."""

    campaign: Campaign
    cells: list[ResultsCell]
    crossovers: list[Crossover]
    failures: list[FailureJSON]
    endpoints: list[EndpointLabel]
    active_runs: int
    dimensions: dict[str, list[Any]] = field(default_factory=dict)
    guidance: dict[str, str | None] = field(default_factory=dict)
    latency_order: list[dict[str, Any]] = field(default_factory=list)
    not_asked: dict[str, str] = field(default_factory=dict)
    operations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": {"id": self.campaign.pk, "name": self.campaign.name},
            "dimensions": self.dimensions,
            "varying": [name for name, values in self.dimensions.items() if len(values) > 1],
            "endpoints": self.endpoints,
            "cells": self.cells,
            "crossovers": [c.to_json() for c in self.crossovers],
            "failures": self.failures,
            "active_runs": self.active_runs,
            "guidance": self.guidance,
            "latency_order": self.latency_order,
            "charts_not_asked": self.not_asked,
            "operations": self.operations,
            "operation_charts": operation_charts(self.operations),
        }


def campaign_results(
    *, campaign: Campaign, filters: ResultsFilter | None = None
) -> CampaignResults:
    """The campaign's results, of the runs `filters` selects."""
    runs = Run.objects.filter(campaign=campaign).filter((filters or ResultsFilter()).q())
    cells = results_cells(runs=runs)
    failures, active = results_failures(runs=runs)
    endpoint_ids = {c["endpoint"] for c in cells} | {f["endpoint"] for f in failures}
    endpoints = _endpoint_labels(endpoint_ids)
    names = {e["id"]: e["name"] for e in endpoints}
    several_vantage_points = len({c["vantage_point"] for c in cells}) > 1
    # The read charts' guidance reads the reads: a write's client counts draw no read chart.
    reads = [c for c in cells if c["operation"] == Operation.READ]
    operations = results_operations(campaign=campaign, cells=cells)
    return CampaignResults(
        campaign=campaign,
        cells=cells,
        crossovers=results_crossovers(
            cells=cells,
            endpoint_names=names,
            name_vantage_point=several_vantage_points,
            asked_fractions=campaign.fractions or [],
            active_runs=active,
        ),
        failures=failures,
        endpoints=endpoints,
        active_runs=active,
        dimensions=_dimensions(cells, failures, endpoints),
        guidance=results_guidance(campaign=campaign, cells=reads, active_runs=active),
        latency_order=latency_order(cells=cells, endpoint_names=names),
        not_asked=charts_not_asked(
            campaign=campaign,
            cells=reads,
            endpoints=campaign.endpoints.count(),
            operations=operations,
        ),
        operations=operations,
    )


def results_cells(*, runs: QuerySet[Run], in_database: bool | None = None) -> list[ResultsCell]:
    """Per parameter set: how many measured runs, and the medians of their aggregates;
    computed by the database if it has percentile_cont (PostgreSQL), else in Python."""
    measured = runs.filter(status__in=Run.Status.MEASURED).annotate(
        vantage_point_name=F("vantage_point__name"),
        **{
            source: _result_number(RESULT_PATHS.get(metric, metric))
            for metric, source in RESULT_METRICS.items()
        },
    )
    if in_database is None:
        in_database = sql.has_percentile_cont()
    rows = _cells_in_database(measured) if in_database else _cells_in_python(measured)
    return [_rounded(row) for row in rows]


def _result_number(path: str) -> Cast:
    """A number of the run JSON, NULL where it is null: SQLite's ->> gives a JSON null as the
    text 'null', which would be cast to 0 and pull the medians down (PostgreSQL's, NULL)."""
    return Cast(NullIf(KT(f"result__{path}"), Value("null")), FloatField())


def _group_fields() -> list[str]:
    fields = {"endpoint": "endpoint_id", "vantage_point": "vantage_point_name"}
    return [fields.get(name, name) for name in DIMENSIONS]


def _metric_source(name: str) -> str:
    return RESULT_METRICS.get(name, name)


def _cells_in_database(runs: QuerySet[Run]) -> list[ResultsCell]:
    aggregates: dict[str, Any] = {"runs": Count("id")}
    aggregates.update({f"{m}_median": Percentile(_metric_source(m), 0.5) for m in METRICS})
    aggregates.update({name: Percentile("wall_s", q) for name, q in SPREAD.items()})
    group = _group_fields()
    rows = runs.values(*group).annotate(**aggregates).order_by(*group)
    return [_cell(row) for row in rows]


def _cells_in_python(runs: QuerySet[Run]) -> list[ResultsCell]:
    """What _cells_in_database computes, for databases without percentile_cont (one query)."""
    group = _group_fields()
    sources = [_metric_source(m) for m in METRICS]
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = defaultdict(list)
    for values_row in runs.values_list(*group, *sources).order_by():
        groups[values_row[: len(group)]].append(values_row[len(group) :])
    cells = []
    for key in sorted(groups, key=_sortable):
        values = groups[key]
        row: dict[str, Any] = dict(zip(group, key, strict=True))
        row["runs"] = len(values)
        for i, metric in enumerate(METRICS):
            row[f"{metric}_median"] = percentile_cont([v[i] for v in values], 0.5)
        walls = [v[METRICS.index("wall_s")] for v in values]
        row.update({name: percentile_cont(walls, q) for name, q in SPREAD.items()})
        cells.append(_cell(row))
    return cells


def _sortable(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((value is None, value) for value in key)


def percentile_cont(values: Iterable[float | None], q: float) -> float | None:
    """PostgreSQL's percentile_cont: nulls ignored, linear interpolation, None if empty."""
    ordered = sorted(float(v) for v in values if v is not None)
    return percentile(ordered, q) if ordered else None


def _cell(row: dict[str, Any]) -> ResultsCell:
    cell: ResultsCell = {
        "endpoint": row["endpoint_id"],
        "vantage_point": row["vantage_point_name"],
    }
    cell.update({name: row[name] for name in DIMENSIONS[2:]})
    cell["runs"] = row["runs"]
    cell.update({metric: row[f"{metric}_median"] for metric in METRICS})
    cell.update({name: row[name] for name in SPREAD})
    return cell


def _rounded(cell: ResultsCell) -> ResultsCell:
    """Medians as precise as the engine records: whole bytes, MB/s to 3 decimals, times to
    the microsecond."""
    for key, value in cell.items():
        if value is None or key in DIMENSIONS:
            continue
        if key.startswith("bytes_"):
            cell[key] = round(value)
        elif key.endswith("_mbps"):
            cell[key] = round(value, 3)
        elif isinstance(value, float):
            cell[key] = round(value, 6)
    return cell


# How the Errors chart names a tester fault's class (a bar of its own, not the endpoint's).
TESTER_FAULT_LABEL = "tester fault"


def results_failures(*, runs: QuerySet[Run]) -> tuple[list[FailureJSON], int]:
    """Final runs that did not fully succeed, by endpoint, vantage point, operation, method,
    status and first error class (the status when a run has no error), each with how many
    final runs that endpoint, vantage point, operation and method had; and how many runs are
    still to come."""
    rows = (
        runs.annotate(
            vantage_point_name=F("vantage_point__name"),
            error_class=KT("errors__0__class"),
            tester_fault=Case(When(q_tester_fault(), then=Value(True)), default=Value(False)),
        )
        .values(
            "endpoint_id",
            "vantage_point_name",
            "operation",
            "method",
            "status",
            "error_class",
            "tester_fault",
        )
        .annotate(n=Count("id"))
        .order_by(
            "endpoint_id", "vantage_point_name", "operation", "method", "status", "error_class"
        )
    )
    totals: dict[tuple[Any, ...], int] = defaultdict(int)
    failures: dict[tuple[Any, ...], int] = defaultdict(int)
    active = 0
    for row in rows:
        where = (row["endpoint_id"], row["vantage_point_name"], row["operation"], row["method"])
        if row["status"] in Run.Status.ACTIVE:
            active += row["n"]
            continue
        totals[where] += row["n"]
        if row["status"] in Run.Status.NOT_SUCCEEDED:
            error_class = row["error_class"] or row["status"]
            if row["tester_fault"]:
                error_class = f"{TESTER_FAULT_LABEL}: {error_class}"
            failures[(*where, row["status"], error_class)] += row["n"]
    return [_failure(key, n, totals[key[:4]]) for key, n in failures.items()], active


def _failure(key: tuple[Any, ...], runs: int, of_runs: int) -> FailureJSON:
    endpoint, vantage_point, operation, method, status, error_class = key
    return {
        "endpoint": endpoint,
        "vantage_point": vantage_point,
        "operation": operation,
        "method": method,
        "status": status,
        "error_class": error_class,
        "tester_fault": error_class.startswith(TESTER_FAULT_LABEL),
        "runs": runs,
        "of_runs": of_runs,
    }


def _endpoint_labels(ids: Iterable[int]) -> list[EndpointLabel]:
    endpoints = Endpoint.objects.filter(pk__in=list(ids)).select_related("site").order_by("name")
    return [
        {
            "id": e.pk,
            "name": e.name,
            "site": e.site.name,
            "protocol": e.protocol,
            "role": e.role,
            "credential_kind": e.credential_kind,
        }
        for e in endpoints
    ]


def _dimensions(
    cells: list[ResultsCell], failures: list[FailureJSON], endpoints: list[EndpointLabel]
) -> dict[str, list[Any]]:
    """The values each dimension takes (endpoints in name order, the rest sorted)."""
    values: dict[str, set[Any]] = {name: set() for name in DIMENSIONS}
    for cell in cells:
        for name in DIMENSIONS:
            values[name].add(cell[name])
    for failure in failures:
        values["vantage_point"].add(failure["vantage_point"])
        values["method"].add(failure["method"])
        values["operation"].add(failure["operation"])
    dimensions = {name: sorted(v) for name, v in values.items() if name != "endpoint"}
    return {"endpoint": [e["id"] for e in endpoints], **dimensions}


def results_crossovers(
    *,
    cells: list[ResultsCell],
    endpoint_names: dict[int, str],
    name_vantage_point: bool = False,
    asked_fractions: Sequence[float] = (),
    active_runs: int = 0,
) -> list[Crossover]:
    """For every parameter set of reads measured with both direct and copy: the crossover
    fraction (`asked_fractions` and `active_runs` say why fewer than two fractions were
    measured). A write's or a storm's cells have a method too (a campaign's axes apply to
    every operation), but no crossover: they read nothing."""
    fixed = [name for name in DIMENSIONS if name not in CROSSOVER_ACROSS]
    times: dict[tuple[Any, ...], dict[str, dict[float, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for cell in cells:
        reads = cell["operation"] == Operation.READ
        if reads and cell["method"] in CROSSOVER_METHODS and cell["wall_s"] is not None:
            key = tuple(cell[name] for name in fixed)
            times[key][cell["method"]][cell["fraction"]] = cell["wall_s"]
    crossovers = []
    for key, by_method in times.items():
        if set(CROSSOVER_METHODS) <= by_method.keys():
            where = endpoint_names.get(key[0], f"endpoint {key[0]}")
            if name_vantage_point:
                where = f"{where} from {key[1]}"
            found = crossover(
                by_method[Method.DIRECT],
                by_method[Method.COPY],
                where=where,
                asked_fractions=asked_fractions,
                active_runs=active_runs,
            )
            crossovers.append(Crossover(key=dict(zip(fixed, key, strict=True)), **found))
    return crossovers


def crossover(
    direct: dict[float, float],
    copy: dict[float, float],
    *,
    where: str,
    asked_fractions: Sequence[float] = (),
    active_runs: int = 0,
) -> dict[str, Any]:
    """Where copying first becomes faster than reading directly, between the fractions both
    were measured at (linear interpolation of the time difference), said in words."""
    fractions = sorted(direct.keys() & copy.keys())
    if len(fractions) < 2:
        text = _too_few_fractions(where, sorted(set(asked_fractions)), active_runs)
        return {"fraction": None, "kind": "too-few-fractions", "text": text}
    gaps = [direct[f] - copy[f] for f in fractions]  # > 0: copying first is faster
    crossings = find_crossings(fractions, gaps)
    span = f"{_percent(fractions[0])}-{_percent(fractions[-1])}"
    upward = [x for x, rising in crossings if rising]
    if upward:
        text = (
            f"Reading more than {_percent(upward[0])} of the file, copying first is faster "
            f"on {where}."
        )
        if len(crossings) > 1:
            text += (
                f" The lines cross {len(crossings)} times between {span}: more repetitions "
                "would tell a trend from noise."
            )
        return {
            "fraction": upward[0],
            "kind": "crossover",
            "text": text,
            "crossings": len(crossings),
        }
    if crossings:
        x = crossings[0][0]
        text = (
            f"Reading less than {_percent(x)} of the file, copying first is faster on {where}; "
            "above it, reading directly is."
        )
        return {"fraction": x, "kind": "crossover", "text": text, "crossings": len(crossings)}
    untied = [gap for gap in gaps if gap != 0]
    if not untied:
        return {
            "fraction": None,
            "kind": "no-difference",
            "text": f"Reading directly and copying first take as long at every measured "
            f"fraction ({span}) on {where}.",
        }
    if untied[0] > 0:
        return {
            "fraction": None,
            "kind": "copy-faster",
            "text": f"Copying first is faster at every measured fraction ({span}) on {where}: "
            "no crossover in the measured range.",
        }
    return {
        "fraction": None,
        "kind": "direct-faster",
        "text": f"Reading directly is faster at every measured fraction ({span}) on {where}: "
        "no crossover in the measured range.",
    }


def _too_few_fractions(where: str, asked: list[float], active_runs: int) -> str:
    """Why direct and copy have fewer than two fractions in common: runs still to come, runs
    that failed, or a campaign that asks for fewer."""
    said = f"Direct and copy were measured together at fewer than two fractions on {where}"
    if len(asked) < 2:
        return f"{said}: add fractions (e.g. 0.1, 0.25, 0.5, 0.75, 1) to find the crossover."
    if active_runs:
        return f"{said} so far: {still_to_come(active_runs)}. Reload when they end."
    fractions = ", ".join(_percent(f) for f in asked)
    return (
        f"{said}, though the campaign asks for {fractions}: the other runs failed, timed out "
        "or were cancelled (see Errors). Launch the campaign again to find the crossover."
    )
