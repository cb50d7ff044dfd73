"""How long a campaign takes: before it is launched (its preview) and while it runs (its ETA).

Each vantage point has one worker measuring one run at a time (docs/workers.md), so a launch
takes as long as its busiest vantage point's runs, one after the other. A run's time is, in
this order of preference:

1. the median duration (started to finished) of earlier succeeded runs with the same
   parameters: endpoint, test file, vantage point and every run parameter;
2. else the bytes it plans to read at the median throughput of the endpoint's earlier runs
   (of the same method, pattern and read size if there are some, else of the same method,
   else of any), plus their median open time;
3. else unknown.

Each run's engine deadline bounds it from above (docs/engine.md, Deadlines), with the
endpoint's last preflight round-trip time (none known: the minimum round trip).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from webapp.campaigns.models import RUN_PARAMETERS, Campaign, MatrixRows, Run
from workers.engine.params import RunParams

# Earlier runs count for this long, the newest SAME_PARAMETERS_RUNS of a parameter set and
# the newest ENDPOINT_RUNS of an endpoint: recent behaviour, in a bounded read.
HISTORY_DAYS = 90
SAME_PARAMETERS_RUNS = 9
ENDPOINT_RUNS = 200
HISTORY_ROWS = 20_000

# What makes two runs "the same parameter set" for the estimate: where and what from, and
# every run parameter but the deadline.
PARAMETERS = (
    "endpoint_id",
    "test_file_id",
    "vantage_point_id",
    *(p.name for p in RUN_PARAMETERS if p.name != "deadline_s"),
)


@dataclass(frozen=True)
class PlannedRun:
    """What the estimate needs of a run: a campaign's cell not launched yet, or a Run."""

    # PARAMETERS' values (vantage_point_id None: a vantage point not saved yet, a draft's).
    values: dict[str, Any]
    params: RunParams  # what the engine would measure (without URLs)
    file_size: int

    @property
    def endpoint_id(self) -> int:
        endpoint_id: int = self.values["endpoint_id"]
        return endpoint_id

    @property
    def vantage_point_id(self) -> int | None:
        vantage_point_id: int | None = self.values["vantage_point_id"]
        return vantage_point_id

    @property
    def key(self) -> tuple[object, ...]:
        return tuple(self.values[name] for name in PARAMETERS)

    @property
    def planned_bytes(self) -> int:
        """What its clients read, as the preview counts it (copies: whole files)."""
        return self.params.run_delivered_bytes(self.file_size)

    def deadline_upper_s(self, rtt_s: float | None) -> float:
        """The engine's deadline for this run (its own if set), at `rtt_s`."""
        return self.params.deadline_s(self.file_size, rtt_s=rtt_s or 0.0)


def campaign_planned_runs(
    *, campaign: Campaign, rows: MatrixRows | None = None
) -> list[PlannedRun]:
    """The runs a launch of the campaign would create (of `rows` for a campaign not saved)."""
    return [run_planned(Run.from_cell(cell, campaign=campaign)) for cell in campaign.cells(rows)]


def run_planned(run: Run) -> PlannedRun:
    """A run (saved or a campaign's cell) as the estimate sees it (use with
    select_related("test_file"))."""
    values = {name: getattr(run, name) for name in PARAMETERS}
    params = run.measured_params(files=[])
    return PlannedRun(values, params, run.test_file.size)


@dataclass(frozen=True)
class RunEstimate:
    """How long one run should take (None: unknown), from what, and at most."""

    seconds: float | None
    source: str  # "same-parameters", "throughput" or "unknown"
    upper_s: float


@dataclass(frozen=True)
class _EndpointRun:
    method: str
    pattern: str
    read_size: int
    throughput_mbps: float
    open_s: float | None


class _History:
    """The earlier runs the estimates go by, read in two queries."""

    def __init__(self, plans: Sequence[PlannedRun], *, now: datetime) -> None:
        since = now - timedelta(days=HISTORY_DAYS)
        self.durations = _same_parameter_durations(plans, since=since)
        self.endpoint_runs, self.rtt_s = _endpoint_runs({p.endpoint_id for p in plans}, since=since)

    def estimate(self, plan: PlannedRun) -> RunEstimate:
        upper_s = plan.deadline_upper_s(self.rtt_s.get(plan.endpoint_id))
        durations = self.durations.get(plan.key)
        if durations:
            return RunEstimate(
                min(statistics.median(durations), upper_s), "same-parameters", upper_s
            )
        seconds = self._from_throughput(plan)
        if seconds is not None:
            return RunEstimate(min(seconds, upper_s), "throughput", upper_s)
        return RunEstimate(None, "unknown", upper_s)

    def _from_throughput(self, plan: PlannedRun) -> float | None:
        runs = self.endpoint_runs.get(plan.endpoint_id, [])
        params = plan.params
        same = (params.method, params.pattern, params.read_size)
        like = (
            [r for r in runs if (r.method, r.pattern, r.read_size) == same]
            or [r for r in runs if r.method == params.method]
            or runs
        )
        if not like:
            return None
        rate_bps = statistics.median(r.throughput_mbps for r in like) * 1e6
        opens = [r.open_s for r in like if r.open_s is not None]
        return plan.planned_bytes / rate_bps + (statistics.median(opens) if opens else 0.0)


def _same_parameter_durations(
    plans: Sequence[PlannedRun], *, since: datetime
) -> dict[tuple[object, ...], list[float]]:
    """Seconds each of the newest succeeded runs of the plans' parameter sets took."""
    if not plans:
        return {}
    wanted = {p.key for p in plans}
    runs = Run.objects.filter(
        status=Run.Status.SUCCEEDED,
        created_at__gte=since,
        started_at__isnull=False,
        finished_at__isnull=False,
        **{f"{name}__in": {p.values[name] for p in plans} for name in PARAMETERS},
    )
    rows = runs.order_by("-created_at", "-id").values_list(*PARAMETERS, "started_at", "finished_at")
    durations: dict[tuple[object, ...], list[float]] = {key: [] for key in wanted}
    for *key, started_at, finished_at in rows[:HISTORY_ROWS]:
        found = durations.get(tuple(key))
        if found is not None and len(found) < SAME_PARAMETERS_RUNS:
            found.append((finished_at - started_at).total_seconds())
    return durations


def _endpoint_runs(
    endpoint_ids: set[int], *, since: datetime
) -> tuple[dict[int, list[_EndpointRun]], dict[int, float]]:
    """The endpoints' newest measured runs, and each endpoint's newest preflight RTT."""
    newest = Window(RowNumber(), partition_by=F("endpoint_id"), order_by=F("created_at").desc())
    runs: QuerySet[Run] = Run.objects.filter(
        endpoint_id__in=endpoint_ids,
        status__in=Run.Status.MEASURED,
        created_at__gte=since,
        throughput_mbps__gt=0,
    )
    rows = (
        runs.annotate(newest=newest)
        .filter(newest__lte=ENDPOINT_RUNS)
        .order_by("endpoint_id", "newest")
        .values_list(
            "endpoint_id",
            "method",
            "pattern",
            "read_size",
            "throughput_mbps",
            "open_s",
            "result__preflight_rtt_s",
        )
    )
    by_endpoint: dict[int, list[_EndpointRun]] = defaultdict(list)
    rtt_s: dict[int, float] = {}
    for endpoint_id, method, pattern, read_size, throughput, open_s, rtt in rows:
        assert throughput is not None  # filtered on throughput_mbps__gt
        by_endpoint[endpoint_id].append(
            _EndpointRun(method, pattern, read_size, throughput, open_s)
        )
        if isinstance(rtt, int | float) and endpoint_id not in rtt_s:
            rtt_s[endpoint_id] = float(rtt)
    return by_endpoint, rtt_s


def runs_estimate(plans: Sequence[PlannedRun], *, now: datetime | None = None) -> list[RunEstimate]:
    """Each planned run's estimate, in the order given (two queries for them all)."""
    history = _History(plans, now=now or timezone.now())
    return [history.estimate(plan) for plan in plans]


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: "40 s", "12 min", "3 h 05 min"."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass(frozen=True)
class CampaignDuration:
    """How long a launch of a campaign should take, and at most (one worker per vantage
    point, one run at a time): the busiest vantage point's runs, one after the other."""

    runs: int
    seconds: float | None  # the runs with an estimate (a lower bound if some have none)
    upper_s: float
    same_parameters: int
    throughput: int
    unknown: int

    @property
    def text(self) -> str:
        if self.seconds is None:
            return "unknown: no earlier runs"
        if self.unknown:
            return f"at least {duration_text(self.seconds)}"
        return f"about {duration_text(self.seconds)}"

    @property
    def basis(self) -> str:
        """What the estimate goes by, in words."""
        parts = []
        if self.same_parameters:
            parts.append(
                f"{_runs(self.same_parameters)} from earlier runs with the same parameters"
            )
        if self.throughput:
            parts.append(f"{_runs(self.throughput)} from the endpoints' earlier throughput")
        if self.unknown and parts:
            parts.append(f"{_runs(self.unknown)} with no earlier run to go by")
        return "; ".join(parts)

    @property
    def upper_text(self) -> str:
        return f"at most {duration_text(self.upper_s)} (the runs' deadlines)"


def campaign_duration(
    *, campaign: Campaign, rows: MatrixRows | None = None, now: datetime | None = None
) -> CampaignDuration:
    """How long launching the campaign would take (of `rows` for a campaign not saved)."""
    plans = campaign_planned_runs(campaign=campaign, rows=rows)
    estimates = runs_estimate(plans, now=now)
    busy: dict[int | None, float] = defaultdict(float)
    upper: dict[int | None, float] = defaultdict(float)
    for plan, estimate in zip(plans, estimates, strict=True):
        busy[plan.vantage_point_id] += estimate.seconds or 0.0
        upper[plan.vantage_point_id] += estimate.upper_s
    sources = [e.source for e in estimates]
    known = len(sources) - sources.count("unknown")
    return CampaignDuration(
        runs=len(plans),
        seconds=max(busy.values()) if known else None,
        upper_s=max(upper.values(), default=0.0),
        same_parameters=sources.count("same-parameters"),
        throughput=sources.count("throughput"),
        unknown=sources.count("unknown"),
    )


@dataclass(frozen=True)
class CampaignEta:
    """How a running campaign's launch stands and when it should end: the runs finished
    so far in this launch, and the estimate of those still queued or running."""

    launched_at: datetime
    launch_runs: int
    done: int
    active: int
    remaining_s: float | None  # None: some run still to come has no estimate
    now: datetime

    @property
    def finish_at(self) -> datetime | None:
        if self.remaining_s is None:
            return None
        return self.now + timedelta(seconds=self.remaining_s)

    @property
    def text(self) -> str:
        if self.remaining_s is None:
            return "unknown: no earlier runs to go by"
        return f"about {duration_text(self.remaining_s)} left"


def campaign_eta(*, campaign: Campaign, now: datetime | None = None) -> CampaignEta | None:
    """The ETA of the campaign's runs still queued or running; None when it has none.

    "This launch" is the runs created since the oldest of those (a launch's runs share their
    created_at). A run still to come takes its estimate (runs_estimate); one with no
    estimate, the median of the runs of this launch that ended on its vantage point; a
    running one, what is left of that after its time so far."""
    now = now or timezone.now()
    active = list(campaign.runs.filter(status__in=Run.Status.ACTIVE).select_related("test_file"))
    if not active:
        return None
    launched_at = min(run.created_at for run in active)
    ended = campaign.runs.filter(created_at__gte=launched_at).exclude(status__in=Run.Status.ACTIVE)
    ended_s = _ended_seconds(ended)
    remaining: dict[int, float] = defaultdict(float)
    unknown = False
    for run, estimate in zip(
        active, runs_estimate([run_planned(r) for r in active], now=now), strict=True
    ):
        seconds = estimate.seconds
        if seconds is None and ended_s.get(run.vantage_point_id):
            seconds = statistics.median(ended_s[run.vantage_point_id])
        if seconds is None:
            unknown = True
            continue
        if run.started_at is not None:
            seconds = max(0.0, seconds - (now - run.started_at).total_seconds())
        remaining[run.vantage_point_id] += seconds
    done = ended.count()
    return CampaignEta(
        launched_at=launched_at,
        launch_runs=done + len(active),
        done=done,
        active=len(active),
        remaining_s=None if unknown else max(remaining.values(), default=0.0),
        now=now,
    )


def _ended_seconds(ended: QuerySet[Run]) -> dict[int, list[float]]:
    """How long each ended run that started took, per vantage point."""
    seconds: dict[int, list[float]] = defaultdict(list)
    rows = ended.filter(started_at__isnull=False, finished_at__isnull=False)
    for vantage_point_id, started_at, finished_at in rows.values_list(
        "vantage_point_id", "started_at", "finished_at"
    ):
        assert started_at is not None and finished_at is not None  # filtered on __isnull
        seconds[vantage_point_id].append((finished_at - started_at).total_seconds())
    return seconds


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"
