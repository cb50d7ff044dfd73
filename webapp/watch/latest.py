"""Each series' latest state (SeriesLatest), kept by the watch's pass from the rollups it has
just written: whether the series' latest night failed and since which night, and its latest
measured night against the seven nights before. The alerts page, its API and home read these
rows (one per series) instead of recomputing medians over raw runs on every request.

The pass refreshes the series measured on the nights it rolled up, from their rows since
BASELINE_NIGHTS + 1 before the first of those nights; a failing streak that reaches further
back is carried on from the series' previous state; when a later pass backfills older
nights, the streaks that began at the old edge are read again (series_latest_backfilled).
Two bounded reads of raw runs name the runs behind the figures: the latest failed run of a
failing series' latest night (its error) and the latest measured run of each series' latest
measured night.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, FloatField, Max, OuterRef, Q
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from webapp.campaigns.metrics import METRICS, RUN_METRICS
from webapp.campaigns.models import Run, q_not_tester_fault, q_tester_fault
from webapp.core import sql
from webapp.sites.models import Endpoint
from webapp.watch.models import SeriesLatest, SeriesNight, SeriesTesterFault
from webapp.watch.rollups import SERIES_FIELDS, night_bounds

# The metrics whose latest night is kept against the nights before (speeds, not costs).
SPEED_METRICS = tuple(m.name for m in RUN_METRICS if m.speed)
BASELINE_NIGHTS = 7
# The nights read for a state; a streak or a last good night further back is read on demand.
WINDOW_NIGHTS = 60
ENDPOINTS_PER_CHUNK = 25
ERROR_MESSAGE_CHARS = 300
WORST = 1e9  # the factor of a speed that fell to 0
COUNTS = ("night", "runs", "succeeded", "partial", "failed", "tester_faults")

Series = tuple[Any, ...]  # the SERIES_FIELDS values


@dataclass
class State:
    """What one series' nights say, before it is written as its SeriesLatest row."""

    site_night: date | None = None
    failing: bool = False
    failing_since: date | None = None
    failures: int = 0
    last_good: date | None = None
    failed_run: dict[str, Any] | None = None
    measured_night: date | None = None
    measured_run: int | None = None
    baseline_runs: int = 0
    metrics: dict[str, dict[str, float | None]] = field(default_factory=dict)
    worst_factor: float | None = None


def series_latest_refresh(*, nights: Sequence[date]) -> int:
    """Refresh the SeriesLatest rows of the series with rollups on `nights` (those a pass has
    just rolled up). Returns the rows written."""
    if not nights:
        return 0
    first = min(nights) - timedelta(days=BASELINE_NIGHTS + 1)
    start = max(first, max(nights) - timedelta(days=WINDOW_NIGHTS))
    # An index probe per endpoint (a DISTINCT over a year of rollups would read them all).
    rolled = SeriesNight.objects.filter(_night_ranges(nights, 0), endpoint=OuterRef("pk"))
    endpoints = list(
        Endpoint.objects.filter(Exists(rolled)).order_by("pk").values_list("pk", flat=True)
    )
    with transaction.atomic():  # the pages see a pass's states whole, or the previous ones
        written = sum(_refresh_chunk(chunk, first, start) for chunk in _chunks(endpoints))
        series_tester_faults_refresh(nights=nights)
    return written


def series_latest_backfilled(*, backfilled: Sequence[date]) -> int:
    """After a pass rolled up older nights (`backfilled`, just before the nights rolled up
    until then: rollups.py's backfill), the states those nights may change: a failing streak
    that began on the first night rolled up before, or a series with no good night yet, may
    reach into them. Those series (of the current window) are read again from scratch, back
    to the backfilled nights; the others are settled by the nights they had. Returns the rows
    written."""
    if not backfilled:
        return 0
    latest = SeriesNight.objects.aggregate(last=Max("night"))["last"]
    if latest is None:
        return 0
    first = min(backfilled)
    start = max(first, latest - timedelta(days=WINDOW_NIGHTS))
    edge = max(backfilled) + timedelta(days=1)
    unsettled = SeriesLatest.objects.filter(
        Q(last_good__isnull=True) | Q(failing=True, last_good__lt=edge),
        site_night__gte=start,
    )
    endpoints = sorted(set(unsettled.values_list("endpoint_id", flat=True)))
    if not endpoints:
        return 0
    with transaction.atomic():
        unsettled.delete()  # read from scratch, not carried on from the old edge
        return sum(_refresh_chunk(chunk, first, start) for chunk in _chunks(endpoints))


def series_tester_faults_refresh(*, nights: Sequence[date]) -> None:
    """The SeriesTesterFault rows of `nights`, from their runs (tester faults are few: the
    runs of those nights are read once, by their creation time)."""
    nights = sorted(set(nights))
    faults = (
        Run.objects.filter(_ranges(nights), q_tester_fault(), status__in=Run.Status.ENDED)
        .annotate(error_class=KT("errors__0__class"), phase=KT("errors__0__phase"))
        .order_by("created_at", "id")
        .values_list(*SERIES_FIELDS, "error_class", "phase", "created_at", "id")
    )
    rows: dict[tuple[Any, ...], SeriesTesterFault] = {}
    for *series, error_class, phase, created_at, run_id in faults.iterator(10000):
        at = _aware(created_at)
        key = (at.date(), *series, error_class or "", phase or "")
        row = rows.get(key)
        if row is None:
            row = rows[key] = SeriesTesterFault(
                night=key[0],
                **dict(zip(SERIES_FIELDS, series, strict=True)),
                error_class=key[-2],
                phase=key[-1],
                runs=0,
                latest_at=at,
                run=run_id,
            )
        row.runs += 1
        row.latest_at, row.run = at, max(row.run, run_id)
    with transaction.atomic():
        SeriesTesterFault.objects.filter(night__in=nights).delete()
        SeriesTesterFault.objects.bulk_create(rows.values(), batch_size=2000)


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), ENDPOINTS_PER_CHUNK):
        yield ids[start : start + ENDPOINTS_PER_CHUNK]


def _refresh_chunk(endpoints: list[int], first: date, start: date) -> int:
    """The states of `endpoints`' series from their nights since `start`, read further back
    (down to `first`) only for the series whose streak or last good night reaches past it
    (after a history's first pass, a few)."""
    nights = _counts(endpoints, start, None)
    previous = _previous(endpoints)
    while start > first:
        short = [s for s, rows in nights.items() if _needs_more(rows, previous.get(s))]
        if not short:
            break
        end, start = start, max(first, start - timedelta(days=4 * WINDOW_NIGHTS))
        older = _counts(sorted({s[0] for s in short}), start, end)
        for series in short:
            nights[series] = older.get(series, []) + nights[series]
    states = {series: _state(rows, previous.get(series)) for series, rows in nights.items()}
    _add_metrics(endpoints, states)
    _add_failed_runs(endpoints, states)
    _add_measured_runs(endpoints, states)
    return _write(states)


def _counts(
    endpoints: list[int], start: date, end: date | None
) -> dict[Series, list[tuple[Any, ...]]]:
    """Each series' nights from `start` (to before `end`) as COUNTS tuples, in night order."""
    rows = SeriesNight.objects.filter(endpoint_id__in=endpoints, night__gte=start)
    if end is not None:
        rows = rows.filter(night__lt=end)
    nights: dict[Series, list[tuple[Any, ...]]] = defaultdict(list)
    # Read whole (a chunk's nights: tens of thousands of short rows), not through a server-side
    # cursor: PostgreSQL plans a cursor for its first rows, a walk of the night index over
    # every endpoint's rows (2 s a chunk at 15,000 series instead of 0.3 s).
    for row in rows.order_by("night").values_list(*SERIES_FIELDS, *COUNTS):
        nights[row[: len(SERIES_FIELDS)]].append(row[len(SERIES_FIELDS) :])
    return nights


def _needs_more(rows: list[tuple[Any, ...]], previous: SeriesLatest | None) -> bool:
    """Whether the nights read do not settle the series' state: every night of the site's
    failed (since when?), or none succeeded or measured, and no previous state says."""
    site = [r for r in rows if r[1] - r[5] > 0]
    if previous is not None:
        return bool(site) and all(r[2] + r[3] == 0 for r in site) and not previous.failing
    measured = [r for r in rows if r[2] + r[3] > 0]
    return not site or not measured or not any(r[2] for r in rows)


def _previous(endpoints: list[int]) -> dict[Series, SeriesLatest]:
    rows = SeriesLatest.objects.filter(endpoint_id__in=endpoints)
    return {tuple(getattr(row, f) for f in SERIES_FIELDS): row for row in rows}


def _state(rows: list[tuple[Any, ...]], previous: SeriesLatest | None) -> State:
    """The failing streak and the latest nights of one series' rows (in night order)."""
    state = State(last_good=previous.last_good if previous else None)
    site_nights = []
    for night, runs, succeeded, partial, failed, tester_faults in rows:
        if succeeded and (state.last_good is None or night > state.last_good):
            state.last_good = night
        if succeeded + partial:
            state.measured_night = night
        if runs - tester_faults > 0:
            site_nights.append((night, succeeded + partial, failed))
    if not site_nights:
        return _carried(state, previous)
    state.site_night = site_nights[-1][0]
    streak = []
    for night, measured, failed in reversed(site_nights):
        if measured or not failed:
            break
        streak.append((night, failed))
    state.failing = bool(streak)
    if streak:
        state.failing_since = streak[-1][0]
        state.failures = sum(failed for _, failed in streak)
        if len(streak) == len(site_nights) and previous and previous.failing:
            _carry_streak(state, streak, previous)
    if state.measured_night is None and previous:
        state.measured_night = previous.measured_night
    return state


def _carried(state: State, previous: SeriesLatest | None) -> State:
    """Only tester faults lately: the site's figures stay as they were."""
    if previous is None:
        return state
    for name in ("site_night", "failing", "failing_since", "failures", "failed_run"):
        setattr(state, name, getattr(previous, name))
    state.measured_night = state.measured_night or previous.measured_night
    return state


def _carry_streak(state: State, streak: list[tuple[date, int]], previous: SeriesLatest) -> None:
    """The streak reaches back past the nights read and the series was failing before: it
    has been failing since the previous state's first night, with its failures too."""
    assert previous.site_night is not None and previous.failing_since is not None
    if previous.failing_since < state.failing_since:  # type: ignore[operator]
        later = sum(failed for night, failed in streak if night > previous.site_night)
        state.failing_since = previous.failing_since
        state.failures = previous.failures + later


def _spans(nights: Iterable[date], before: int) -> list[tuple[date, date]]:
    """The nights (each with `before` nights before it) as spans of consecutive nights."""
    spans: list[tuple[date, date]] = []
    for night in sorted(set(nights)):
        first = night - timedelta(days=before)
        if spans and first <= spans[-1][1] + timedelta(days=1):
            spans[-1] = (spans[-1][0], max(spans[-1][1], night))
        else:
            spans.append((first, night))
    return spans


def _ranges(nights: Iterable[date], before: int = 0) -> Q:
    """Runs created on these nights (each with `before` nights before it)."""
    query = Q(pk__in=[])
    for first, last in _spans(nights, before):
        query |= Q(created_at__gte=night_bounds(first)[0], created_at__lt=night_bounds(last)[1])
    return query


def _night_ranges(nights: Iterable[date], before: int) -> Q:
    """Rollups of these nights (each with `before` nights before it)."""
    query = Q(pk__in=[])
    for first, last in _spans(nights, before):
        query |= Q(night__gte=first, night__lte=last)
    return query


def _add_metrics(endpoints: list[int], states: dict[Series, State]) -> None:
    """Each series' speed metrics: its latest measured night's median against the median of
    the nightly medians of the BASELINE_NIGHTS nights before it."""
    latest = {s.measured_night for s in states.values() if s.measured_night}
    if not latest:
        return
    medians = {m: Cast(KT(f"metrics__{m}__median"), FloatField()) for m in SPEED_METRICS}
    rows = (
        SeriesNight.objects.filter(
            _night_ranges(latest, BASELINE_NIGHTS), endpoint_id__in=endpoints
        )
        .annotate(**{f"m_{m}": e for m, e in medians.items()})
        .order_by()
        .values_list(*SERIES_FIELDS, "night", "succeeded", "partial", *(f"m_{m}" for m in medians))
    )
    nights: dict[Series, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:  # whole, as _counts
        nights[row[: len(SERIES_FIELDS)]].append(row[len(SERIES_FIELDS) :])
    for series, state in states.items():
        if state.measured_night is not None:
            _compare(state, nights.get(series, []))


def _compare(state: State, rows: list[tuple[Any, ...]]) -> None:
    measured_night = state.measured_night
    assert measured_night is not None
    start = measured_night - timedelta(days=BASELINE_NIGHTS)
    nights_before = [r for r in rows if start <= r[0] < measured_night]
    tonight = [r for r in rows if r[0] == measured_night]
    state.baseline_runs = sum(r[1] + r[2] for r in nights_before)
    for i, metric in enumerate(SPEED_METRICS):
        latest = tonight[0][3 + i] if tonight else None
        before = [r[3 + i] for r in nights_before if r[3 + i] is not None]
        if latest is not None:
            baseline = statistics.median(before) if before else None
            state.metrics[metric] = {"latest": latest, "baseline": baseline}
            factor = worse_factor(metric, latest, baseline)
            if factor is not None:
                state.worst_factor = max(factor, state.worst_factor or 0.0)


def worse_factor(metric: str, latest: float, baseline: float | None) -> float | None:
    """How many times worse than `baseline` `latest` is (below 1: better); None without a
    baseline. A speed that fell to nothing is WORST times worse."""
    if baseline is None or baseline <= 0:
        return None
    if METRICS[metric].higher_is_better:
        return baseline / latest if latest > 0 else WORST
    return latest / baseline


def _add_failed_runs(endpoints: list[int], states: dict[Series, State]) -> None:
    """The latest failed run (the site's) of each failing series' latest night."""
    failing = {s.site_night for s in states.values() if s.failing and s.site_night}
    if not failing:
        return
    runs = (
        Run.objects.filter(
            _ranges(failing),
            q_not_tester_fault(),
            endpoint_id__in=endpoints,
            status__in=Run.Status.FAILED_OR_TIMED_OUT,
        )
        .annotate(error_class=KT("errors__0__class"), error_message=KT("errors__0__message"))
        .order_by("created_at", "id")
        .values_list(*SERIES_FIELDS, "id", "status", "created_at", "error_class", "error_message")
    )
    for row in runs:
        state = states.get(row[: len(SERIES_FIELDS)])
        run_id, status, created_at, error_class, message = row[len(SERIES_FIELDS) :]
        if state is not None and state.failing and _night_of(created_at) == state.site_night:
            state.failed_run = {
                "id": run_id,
                "status": status,
                "created_at": _aware(created_at).isoformat(),
                "error_class": error_class or "",
                "error_message": (message or "")[:ERROR_MESSAGE_CHARS],
            }


def _add_measured_runs(endpoints: list[int], states: dict[Series, State]) -> None:
    """The latest measured run of each series' latest measured night."""
    latest = {s.measured_night for s in states.values() if s.measured_night}
    if not latest:
        return
    runs = Run.objects.filter(
        _ranges(latest), endpoint_id__in=endpoints, status__in=Run.Status.MEASURED
    ).values_list(*SERIES_FIELDS, "id", "created_at")
    for row in runs.order_by():
        state = states.get(row[: len(SERIES_FIELDS)])
        run_id, created_at = row[len(SERIES_FIELDS) :]
        if state is None or _night_of(created_at) != state.measured_night:
            continue
        state.measured_run = max(run_id, state.measured_run or 0)


def _aware(value: Any) -> datetime:
    created = sql.aware_datetime(value)
    assert created is not None
    return created.astimezone(UTC)


def _night_of(value: Any) -> date:
    return _aware(value).date()


def _write(states: dict[Series, State]) -> int:
    rows = [
        SeriesLatest(**dict(zip(SERIES_FIELDS, series, strict=True)), **vars(state))
        for series, state in states.items()
    ]
    SeriesLatest.objects.bulk_create(
        rows,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=[f.removesuffix("_id") for f in SERIES_FIELDS],
        update_fields=[*State.__dataclass_fields__, "updated_at"],
    )
    return len(rows)
