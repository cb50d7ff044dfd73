"""Reads of the regressions for the pages and the API (the same numbers in both): the list,
severity first, and one regression's detail with the nights of its series around the change,
the band its baseline drew, the other vantage points' view, its group and its events."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypedDict

from django.db.models import (
    Case,
    Exists,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from webapp.campaigns.models import PARAMETER_SET_FIELDS, Run
from webapp.campaigns.selectors import SERIES_METRICS
from webapp.sites.models import Site
from webapp.watch.models import Regression, RegressionEvent, SeriesNight, WatchPass
from webapp.watch.rollups import rollups_backfill_before

State = Regression.State
Severity = Regression.Severity

SEVERITY_ORDER = (Severity.CRITICAL, Severity.WARNING, Severity.INFO)
NIGHTS_AROUND = 14  # nights shown before the baseline window and after the target window
MAX_NIGHTS = 120  # the detail never reads more nights of a series than this
MAX_MEMBERS = 100  # members of a blamed group listed (all are counted)
BAND_K = 3.0  # median +/- k * MAD, unless the detector's parameters say otherwise
# Names a detector may give the band's width in its parameters (robust z threshold).
BAND_K_PARAMETERS = ("band_k", "breakage_z", "robust_z", "z_threshold", "z")
MAD_SCALE = 1.4826  # MAD of normal noise, scaled to its standard deviation


def regression_list(*, filters: dict[str, Any] | None = None) -> QuerySet[Regression]:
    """The regressions `filters` select, severity first (critical, warning, info), then the
    newest first, with only their keys read: the order is found on the regressions alone
    (narrow rows), and a page of them is read whole with `regression_rows`. `filters`: state
    and verdict (lists), site, endpoint and vantage_point (rows or ids),
    metric, blame (the blamed kind: site, vantage-point, protocol, credential), silenced
    (True: silenced now; False: not)."""
    return _ordered(filters or {}).only("pk")


def regression_rows(*, keys: Sequence[int]) -> list[Regression]:
    """The regressions of `keys`, in that order, with what a row shows joined."""
    if not keys:
        return []
    rows = {row.pk: row for row in regressions_joined().filter(pk__in=keys)}
    return [rows[key] for key in keys if key in rows]


def regressions_joined() -> QuerySet[Regression]:
    """Every regression with what its rows and its detail show joined."""
    return Regression.objects.select_related(
        "site",
        "endpoint",
        "endpoint__site",
        "vantage_point",
        "parent",
        "acknowledged_by",
        "silenced_by",
    )


def _ordered(filters: dict[str, Any]) -> QuerySet[Regression]:
    rank = Case(
        *(When(severity=s, then=Value(i)) for i, s in enumerate(SEVERITY_ORDER)),
        default=Value(len(SEVERITY_ORDER)),
        output_field=IntegerField(),
    )
    regressions = Regression.objects.filter(_list_query(filters))
    return regressions.annotate(severity_rank=rank).order_by("severity_rank", "-opened_at", "-id")


def _list_query(filters: dict[str, Any]) -> Q:
    query = Q()
    if filters.get("state"):
        query &= Q(state__in=filters["state"])
    if filters.get("verdict"):
        query &= Q(verdict__in=filters["verdict"])
    if filters.get("site"):
        site = filters["site"]
        query &= Q(site=site) | Q(endpoint__site=site)
    if filters.get("endpoint"):
        query &= Q(endpoint=filters["endpoint"])
    if filters.get("vantage_point"):
        query &= Q(vantage_point=filters["vantage_point"])
    if filters.get("metric"):
        query &= Q(metric=filters["metric"])
    if filters.get("blame"):
        query &= Q(blame__target=filters["blame"])
    silenced = filters.get("silenced")
    if silenced is not None:
        now_silenced = Q(silenced_until__gt=timezone.now())
        query &= now_silenced if silenced else ~now_silenced
    return query


class LiveRegression(TypedDict):
    """A live regression as another page links to it."""

    id: int
    state: str
    severity: str


def regressions_live(*, keys: Sequence[str]) -> dict[str, LiveRegression]:
    """The live regressions of these keys (at most one each), by key: one query."""
    if not keys:
        return {}
    rows = Regression.objects.filter(key__in=set(keys), state__in=Regression.LIVE)
    return {
        key: {"id": pk, "state": state, "severity": severity}
        for key, pk, state, severity in rows.values_list("key", "pk", "state", "severity")
    }


def regression_sites() -> list[tuple[int, str]]:
    """(id, name) of the sites with regressions (their own or their endpoints'), by name."""
    own = Regression.objects.filter(site=OuterRef("pk"))
    endpoints = Regression.objects.filter(endpoint__site=OuterRef("pk"))
    sites = Site.objects.filter(Exists(own) | Exists(endpoints)).order_by("name")
    return list(sites.values_list("pk", "name"))


def regression_needing_attention(*, limit: int) -> tuple[list[Regression], int]:
    """The home page's open regressions: open, acknowledged or recovering and not silenced
    now, not a member of a blamed group (its group is listed), severity first; at most
    `limit` of them, and how many there are."""
    live = (State.OPEN, State.ACKNOWLEDGED, State.RECOVERING)
    regressions = _ordered({"state": live, "silenced": False}).filter(parent__isnull=True)
    return _first(regressions, limit)


def regression_tester_faults(*, limit: int) -> tuple[list[Regression], int]:
    """Regressions in the tester-fault state (ours, not the site's), as on the home page; not
    the members of a group (a stopped vantage point's series: its not-run regression is
    listed)."""
    faults = _ordered({"state": [State.TESTER_FAULT]}).filter(parent__isnull=True)
    return _first(faults, limit)


def _first(regressions: QuerySet[Regression], limit: int) -> tuple[list[Regression], int]:
    """The first `limit` (few, of the live ones: one query with their joins) and the count."""
    joined = regressions.select_related("site", "endpoint", "endpoint__site", "vantage_point")
    shown = list(joined[:limit])
    return shown, len(shown) if len(shown) < limit else regressions.count()


class NightValue(TypedDict):
    """One night of a series as the detail plots it."""

    night: str
    value: float | None
    q1: float | None
    q3: float | None
    n: int
    runs: int
    server_versions: list[str]
    client_versions: list[str]


class OtherView(TypedDict):
    """Another vantage point's nights of the same endpoint and parameter set."""

    vantage_point: str
    nights: list[NightValue]


class Band(TypedDict):
    median: float
    mad: float
    k: float
    low: float
    high: float
    nights: int


class RegressionDetail(TypedDict):
    """What the detail page and the detail API show of one regression."""

    unit: str
    windows: dict[str, list[str] | None]
    nights: list[NightValue]
    band: Band | None
    others: list[OtherView]
    members: list[Regression]
    members_total: int
    events: list[RegressionEvent]
    # The nights before this one are not rolled up yet (the first passes over a history
    # backfill them): missing from `nights` and `others`, not empty. None: nothing missing.
    rolling_up_before: str | None


def regression_get(*, pk: int) -> Regression:
    """One regression with what its detail shows joined (Regression.DoesNotExist if none)."""
    return regressions_joined().get(pk=pk)


def regression_detail(*, regression: Regression) -> RegressionDetail:
    """The series' nights over the detector's windows and NIGHTS_AROUND around them, the
    band of the baseline window, the other vantage points' nights of the same endpoint and
    parameter set in the same range, the members of its group and its events."""
    windows = _windows(regression)
    first, last = _night_range(regression, windows)
    nights = _series_nights(regression, first, last)
    members = regression.members.select_related("endpoint", "endpoint__site", "vantage_point")
    shown_members = list(members.order_by("endpoint__name", "vantage_point__name")[:MAX_MEMBERS])
    events = list(regression.events.select_related("actor"))
    return {
        "unit": metric_unit(regression.metric),
        "windows": windows,
        "nights": [_night_value(regression.metric, night) for night in nights["own"]],
        "band": _band(regression, nights["own"], windows),
        "others": _other_views(regression.metric, nights["others"]),
        "members": shown_members,
        "members_total": _count(members, shown_members, MAX_MEMBERS),
        "events": events,
        "rolling_up_before": _rolling_up_before(first),
    }


def _rolling_up_before(first: date) -> str | None:
    pending = rollups_backfill_before()
    return pending.isoformat() if pending is not None and first < pending else None


def metric_unit(metric: str) -> str:
    """A run metric's unit; availability and error classes are shares of the runs."""
    return SERIES_METRICS.get(metric, "share of runs")


def _count(rows: QuerySet[Regression], shown: list[Regression], limit: int) -> int:
    return len(shown) if len(shown) < limit else int(rows.count())


def _windows(regression: Regression) -> dict[str, list[str] | None]:
    detector = regression.detector or {}
    return {name: _window(detector.get(f"{name}_window")) for name in ("baseline", "target")}


def _window(value: object) -> list[str] | None:
    """[from, to]: ISO nights, or ISO times in UTC for a verdict about moments (a queue's
    wait, a slot, a credential's warning window); None when there is none."""
    if isinstance(value, list | tuple) and len(value) == 2:
        try:
            return [_moment(str(v)) for v in value]
        except ValueError:
            return None
    return None


def _moment(text: str) -> str:
    if len(text) == len("2026-10-01"):
        return date.fromisoformat(text).isoformat()
    return datetime.fromisoformat(text).astimezone(UTC).isoformat()


def _night_range(regression: Regression, windows: dict[str, list[str] | None]) -> tuple[date, date]:
    """From NIGHTS_AROUND before the baseline window (or the change) to NIGHTS_AROUND after
    the target window, not past the last night evaluated, and at most MAX_NIGHTS long."""
    marks = [date.fromisoformat(d[:10]) for window in windows.values() if window for d in window]
    marks += [d for d in (regression.change_night, regression.last_night) if d]
    last = min(max(marks) + timedelta(days=NIGHTS_AROUND), regression.last_night)
    first = max(min(marks) - timedelta(days=NIGHTS_AROUND), last - timedelta(days=MAX_NIGHTS))
    return first, last


def regression_night_range(*, regression: Regression) -> tuple[date, date]:
    """The first and last nights of its series its detail shows (its evidence shows the same)."""
    return _night_range(regression, _windows(regression))


def _series_nights(regression: Regression, first: date, last: date) -> dict[str, list[SeriesNight]]:
    """The regression's own series' nights and the other vantage points' (one query); none
    for a group's regression (no endpoint, vantage point or parameter set of its own)."""
    if regression.endpoint_id is None or regression.method == "":
        return {"own": [], "others": []}
    parameter_set = {f: getattr(regression, f) for f in PARAMETER_SET_FIELDS}
    rows = (
        SeriesNight.objects.filter(
            endpoint_id=regression.endpoint_id, night__range=(first, last), **parameter_set
        )
        .select_related("vantage_point")
        .order_by("vantage_point__name", "night")
    )
    own: list[SeriesNight] = []
    others: list[SeriesNight] = []
    for row in rows:
        (own if row.vantage_point_id == regression.vantage_point_id else others).append(row)
    return {"own": own, "others": others}


def night_metric(
    metric: str, night: SeriesNight
) -> tuple[float | None, float | None, float | None, int]:
    """(median, q1, q3, n) of `metric` on `night`: a run metric's distribution; for
    availability and "error:<class>" the share of the site's runs (tester faults left out)."""
    counted = night.runs - night.tester_faults
    if metric == "availability" or metric.startswith("error:"):
        if counted <= 0:
            return None, None, None, 0
        hits = night.succeeded if metric == "availability" else night.errors.get(metric[6:], 0)
        share = hits / counted
        return share, None, None, counted
    summary = (night.metrics or {}).get(metric) or {}
    median = summary.get("median")
    return (
        None if median is None else float(median),
        _float(summary.get("q1")),
        _float(summary.get("q3")),
        int(summary.get("n") or 0),
    )


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _night_value(metric: str, night: SeriesNight) -> NightValue:
    value, q1, q3, n = night_metric(metric, night)
    return {
        "night": night.night.isoformat(),
        "value": value,
        "q1": q1,
        "q3": q3,
        "n": n,
        "runs": night.runs,
        "server_versions": [str(v) for v in night.server_versions or []],
        "client_versions": [str(v) for v in night.client_versions or []],
    }


def _other_views(metric: str, rows: list[SeriesNight]) -> list[OtherView]:
    views: dict[str, OtherView] = {}
    for row in rows:
        name = row.vantage_point.name
        views.setdefault(name, {"vantage_point": name, "nights": []})
        views[name]["nights"].append(_night_value(metric, row))
    return list(views.values())


def _band(
    regression: Regression, nights: list[SeriesNight], windows: dict[str, list[str] | None]
) -> Band | None:
    """median +/- k * MAD (scaled to a standard deviation) of the baseline window's nights:
    the band a night must leave to count as a breakage."""
    window = windows["baseline"]
    if window is None:
        return None
    start, end = window
    values = [
        value
        for night in nights
        if start <= night.night.isoformat() <= end
        for value in [night_metric(regression.metric, night)[0]]
        if value is not None
    ]
    if not values:
        return None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values) * MAD_SCALE
    k = band_k(regression.detector)
    return {
        "median": median,
        "mad": mad,
        "k": k,
        "low": median - k * mad,
        "high": median + k * mad,
        "nights": len(values),
    }


def band_k(detector: dict[str, Any]) -> float:
    """The band's width in MADs: the detector's robust z threshold if it names one."""
    parameters = detector.get("parameters") if isinstance(detector, dict) else None
    if isinstance(parameters, dict):
        for name in BAND_K_PARAMETERS:
            value = parameters.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return float(value)
    return BAND_K


class WatchAsOf(TypedDict):
    """Which pass of the watch the stored figures come from, and what it has not seen."""

    pass_at: datetime | None  # when the last pass finished (None: the watch never ran)
    watermark: datetime | None  # runs that ended up to then are rolled up
    first_night: date | None  # the nights rolled up, first and last
    last_night: date | None
    newest_run_at: datetime | None  # the newest run's creation
    newer_runs: bool  # runs created after the watermark: not in the figures until a pass


def watch_as_of() -> WatchAsOf:
    """The last pass, the nights its rollups span and whether newer runs wait: three queries,
    each an index probe."""
    last = WatchPass.objects.exclude(finished_at=None).order_by("-finished_at", "-id").first()
    span = SeriesNight.objects.aggregate(first=Min("night"), last=Max("night"))
    newest = Run.objects.order_by("-created_at", "-id").values_list("created_at", flat=True)
    newest_at = newest.first()
    watermark = last.watermark if last else None
    return {
        "pass_at": last.finished_at if last else None,
        "watermark": watermark,
        "first_night": span["first"],
        "last_night": span["last"],
        "newest_run_at": newest_at,
        "newer_runs": newest_at is not None and (watermark is None or newest_at > watermark),
    }
