"""No data: a series that stopped being measured (docs/watch.md#no-data). It is a state of
its own, never open against the site and never resolved while the series stays unmeasured.

A series *stopped* on the evaluated night when it was not measured on
FEDPROBE_WATCH_NO_DATA_NIGHTS nights on which its vantage point measured other series (and,
for a series measured less often than nightly, on that many of its own usual intervals).
- a live regression of a stopped series goes to no-data;
- a stopped series without one gets a regression in state no-data (key
  `series:...:availability`, blamed on nothing) when it was measured on at least
  FEDPROBE_WATCH_NO_DATA_MIN_NIGHTS nights of the lookback window, a scheduled campaign that
  is not paused still asks for it (a campaign deleted, paused, unscheduled or edited to
  leave it out stopped it on purpose), its vantage point measured tonight (a vantage point
  that measured nothing is the not-run rule's), its endpoint is in no downtime tonight, and
  nobody resolved it by hand since it stopped;
- when more of a vantage point's series stopped than it measured tonight, that is the
  vantage point's trouble: one regression `vp:<name>:no-data` instead of one per series.
Measured again, a series is judged as usual: good resolves its no-data regression, bad opens
it. The stopped series are found by one grouped query over the lookback window.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Min

from webapp.campaigns.models import Campaign, family_runs
from webapp.sites.models import Endpoint, VantagePoint
from webapp.watch.episodes import Finding, regression_no_data, regression_open
from webapp.watch.models import Regression, RegressionEvent, SeriesNight
from webapp.watch.rollups import SERIES_FIELDS
from webapp.watch.series import SeriesId
from webapp.watch.states import regression_set_state

State = Regression.State
DETECTOR = "no-data"
# A series key's parts before its metric: "series", endpoint, vantage point, parameter set.
SERIES_KEY_PARTS = 8


@dataclass(frozen=True)
class Stopped:
    """A series not measured on the evaluated night, as the grouped query found it."""

    series: SeriesId
    first: date  # its first and last night in the lookback window
    last: date
    nights: int  # how many nights of the window measured it
    missed: int  # its vantage point's nights since its last one


def series_no_data(
    *,
    night: date,
    now: datetime,
    live: dict[str, Regression],
    measuring: dict[int, list[date]],
    downtime: frozenset[int],
) -> None:
    """Move the stopped series' live regressions to no-data and open no-data regressions
    for the regular series that stopped, as of `night` (see the module)."""
    needed = settings.FEDPROBE_WATCH_NO_DATA_NIGHTS
    stopped = [s for s in _stopped(night, measuring) if s.missed >= needed]
    by_series = _live_by_series(live)
    new: list[Stopped] = []
    for one in stopped:
        regressions = by_series.get(one.series.key(""), [])
        for regression in regressions:
            regression_no_data(regression=regression, night=night, at=now)
        if not regressions and _regular(one, night, measuring, downtime):
            new.append(one)
    new = _still_wanted(new)
    new = _not_resolved_by_hand(new)
    _open(new, night, now, live)


def series_key_prefix(key: str) -> str:
    """The series part of a series regression's key ("series:...:" before its metric)."""
    return ":".join(key.split(":")[:SERIES_KEY_PARTS]) + ":"


def _stopped(night: date, measuring: dict[int, list[date]]) -> list[Stopped]:
    first = night - timedelta(days=settings.FEDPROBE_WATCH_LOOKBACK_NIGHTS - 1)
    rows = (
        SeriesNight.objects.filter(night__gte=first, night__lte=night)
        .values(*SERIES_FIELDS)
        .annotate(first=Min("night"), last=Max("night"), nights=Count("id"))
        .filter(last__lt=night)
        .order_by()
        .values_list(*SERIES_FIELDS, "first", "last", "nights")
    )
    found = []
    # Not .iterator(): a server-side cursor makes PostgreSQL plan for the first rows (an
    # index scan in series order over the whole window, 20 times slower than hashing it).
    for row in rows:
        series = SeriesId(*row[: len(SERIES_FIELDS)])
        first_night, last, nights = row[len(SERIES_FIELDS) :]
        points = measuring.get(series.vantage_point_id, [])  # in night order
        missed = len(points) - bisect_right(points, last)
        found.append(Stopped(series, first_night, last, nights, missed))
    return found


def _live_by_series(live: dict[str, Regression]) -> dict[str, list[Regression]]:
    found: dict[str, list[Regression]] = defaultdict(list)
    for key, regression in live.items():
        if key.startswith("series:"):
            found[series_key_prefix(key)].append(regression)
    return found


def _regular(
    one: Stopped, night: date, measuring: dict[int, list[date]], downtime: frozenset[int]
) -> bool:
    """Measured often enough to be missed, missed for its own cadence too, by a vantage
    point that measured tonight, on an endpoint in no downtime."""
    if one.nights < settings.FEDPROBE_WATCH_NO_DATA_MIN_NIGHTS:
        return False
    points = measuring.get(one.series.vantage_point_id, [])
    if not points or points[-1] != night or one.series.endpoint_id in downtime:
        return False
    cadence = max(1, round((one.last - one.first).days / (one.nights - 1)))
    return (night - one.last).days >= settings.FEDPROBE_WATCH_NO_DATA_NIGHTS * cadence


def _still_wanted(stopped: list[Stopped]) -> list[Stopped]:
    """Those a scheduled campaign that is not paused still asks for (4 queries)."""
    if not stopped:
        return []
    wanted = _wanted_parameter_sets()
    return [
        one
        for one in stopped
        if any(
            _asks_for(axes, one.series)
            for axes in wanted.get((one.series.endpoint_id, one.series.vantage_point_id), [])
        )
    ]


Axes = dict[str, list[object]]


def _wanted_parameter_sets() -> dict[tuple[int, int], list[Axes]]:
    """(endpoint, vantage point) -> the parameter axes of each running scheduled campaign
    that measures it (enabled endpoints only: a disabled one is stopped on purpose)."""
    running = Campaign.objects.exclude(schedule="").filter(schedule_paused_at__isnull=True)
    axes = {
        row["pk"]: {
            # A campaign from before operations existed has none stored: it reads.
            "operation": row["operations"] or ["read"],
            "method": row["methods"],
            "pattern": row["patterns"],
            "read_size": row["read_sizes"],
            "fraction": row["fractions"],
            "clients": row["clients"],
            "address_family": family_runs(row["address_family"]),
        }
        for row in running.values(
            "pk",
            "operations",
            "methods",
            "patterns",
            "read_sizes",
            "fractions",
            "clients",
            "address_family",
        )
    }
    chosen: dict[int, set[int]] = defaultdict(set)
    for campaign, endpoint in Campaign.test_files.through.objects.filter(
        campaign_id__in=axes, testfile__endpoint__enabled=True
    ).values_list("campaign_id", "testfile__endpoint_id"):
        chosen[campaign].add(endpoint)
    listed: dict[int, set[int]] = defaultdict(set)
    for campaign, endpoint in Campaign.endpoints.through.objects.filter(
        campaign_id__in=axes, endpoint__enabled=True
    ).values_list("campaign_id", "endpoint_id"):
        listed[campaign].add(endpoint)
    points: dict[int, set[int]] = defaultdict(set)
    for campaign, point in Campaign.vantage_points.through.objects.filter(
        campaign_id__in=axes
    ).values_list("campaign_id", "vantagepoint_id"):
        points[campaign].add(point)
    wanted: dict[tuple[int, int], list[Axes]] = defaultdict(list)
    for campaign, campaign_axes in axes.items():
        for endpoint in chosen.get(campaign) or listed.get(campaign, set()):
            for point in points.get(campaign, set()):
                wanted[(endpoint, point)].append(campaign_axes)
    return wanted


def _asks_for(axes: Axes, series: SeriesId) -> bool:
    return all(getattr(series, name) in values for name, values in axes.items())


def _not_resolved_by_hand(stopped: list[Stopped]) -> list[Stopped]:
    """Leave out the series whose no-data regression someone resolved since they stopped:
    it stays resolved until the series is measured again (and stops again)."""
    if not stopped:
        return []
    keys = {one.series.key("availability"): one for one in stopped}
    resolved = Regression.objects.filter(key__in=keys, state=State.RESOLVED).values_list(
        "key", "last_night"
    )
    done = {key for key, last_night in resolved if last_night > keys[key].last}
    return [one for one in stopped if one.series.key("availability") not in done]


def _open(stopped: list[Stopped], night: date, now: datetime, live: dict[str, Regression]) -> None:
    """A no-data regression per stopped series, or one per vantage point that stopped more
    of its series than it measured tonight; and resolve the vantage points' that no longer
    do."""
    by_point: dict[int, list[Stopped]] = defaultdict(list)
    for one in stopped:
        by_point[one.series.vantage_point_id].append(one)
    tonight = dict(
        SeriesNight.objects.filter(night=night)
        .values("vantage_point_id")
        .annotate(n=Count("id"))
        .values_list("vantage_point_id", "n")
    )
    flooded = {p for p, series in by_point.items() if len(series) > tonight.get(p, 0)}
    names = dict(
        VantagePoint.objects.filter(pk__in=set(tonight) | flooded).values_list("id", "name")
    )
    sites = dict(
        Endpoint.objects.filter(pk__in={one.series.endpoint_id for one in stopped}).values_list(
            "id", "site_id"
        )
    )
    opened: list[Regression] = []
    for point, series in by_point.items():
        if point in flooded:
            _point_no_data(
                names[point],
                point=point,
                stopped=len(series),
                measured=tonight.get(point, 0),
                since=min(one.last for one in series),
                night=night,
                now=now,
                live=live,
            )
            continue
        opened += [
            _series_no_data_regression(one, names[point], sites[one.series.endpoint_id], night, now)
            for one in series
        ]
    _create(opened, now, live)
    for point in set(tonight) - flooded:
        _point_resolved(names[point], night, now, live)


def _series_no_data_regression(
    one: Stopped, point_name: str, site_id: int, night: date, now: datetime
) -> Regression:
    """A stopped series' regression in state no-data, not saved yet."""
    summary = (
        f"not measured since {one.last}, although vantage point {point_name} measured other "
        f"series on {one.missed} nights since and a scheduled campaign still asks for it"
    )
    return Regression(
        key=one.series.key("availability"),
        metric="availability",
        state=State.NO_DATA,
        tier=Regression.Tier.BREAKAGE,
        verdict=Regression.Verdict.INSUFFICIENT_DATA,
        severity=Regression.Severity.INFO,
        summary=summary,
        detector=_detector(one.last, night),
        blame={"target": "", "rule": "no-data: the series stopped being measured"},
        opened_at=now,
        last_night=night,
        site_id=site_id,
        **one.series.subject,
    )


def _create(opened: list[Regression], now: datetime, live: dict[str, Regression]) -> None:
    """Save the new no-data regressions and their opening events: four statements however
    many (a campaign's worth of series may stop in one night)."""
    if not opened:
        return
    with transaction.atomic():
        created = Regression.objects.bulk_create(opened)
        RegressionEvent.objects.bulk_create(
            RegressionEvent(
                regression=regression,
                state=State.NO_DATA,
                previous_state="",
                at=now,
                note=regression.summary,
            )
            for regression in created
        )
    live.update((regression.key, regression) for regression in created)


def _detector(last: date, night: date) -> dict[str, object]:
    return {
        "name": DETECTOR,
        "parameters": {
            "no_data_nights": settings.FEDPROBE_WATCH_NO_DATA_NIGHTS,
            "min_nights": settings.FEDPROBE_WATCH_NO_DATA_MIN_NIGHTS,
        },
        "baseline_window": None,
        "target_window": [(last + timedelta(days=1)).isoformat(), night.isoformat()],
    }


def point_no_data_key(name: str) -> str:
    return f"vp:{name}:no-data"


def _point_no_data(
    name: str,
    *,
    point: int,
    stopped: int,
    measured: int,
    since: date,
    night: date,
    now: datetime,
    live: dict[str, Regression],
) -> None:
    """`since`: the earliest last night of the series it stopped measuring."""
    key = point_no_data_key(name)
    if key in live:
        return
    summary = (
        f"vantage point {name} stopped measuring {stopped} series that a scheduled campaign "
        f"still asks for (it measured {measured} tonight): its worker or its campaigns lost "
        "them"
    )
    live[key] = regression_open(
        finding=Finding(
            key,
            "availability",
            None,
            verdict=Regression.Verdict.INSUFFICIENT_DATA,
            severity=Regression.Severity.WARNING,
            summary=summary,
            subject={"vantage_point_id": point},
            detector={
                "name": DETECTOR,
                "parameters": {"stopped": stopped, "measured": measured},
                # The nights from the first one the series were missed on to tonight.
                "baseline_window": None,
                "target_window": [(since + timedelta(days=1)).isoformat(), night.isoformat()],
            },
            blame={"target": Regression.Blame.VANTAGE_POINT, "rule": "no-data"},
        ),
        state=State.NO_DATA,
        night=night,
        at=now,
    )


def _point_resolved(name: str, night: date, now: datetime, live: dict[str, Regression]) -> None:
    regression = live.get(point_no_data_key(name))
    if regression is None or night <= regression.last_night:
        return
    regression_set_state(
        regression=regression,
        state=State.RESOLVED,
        at=now,
        note=f"vantage point {name} measures its series again",
    )
    live.pop(point_no_data_key(name))
