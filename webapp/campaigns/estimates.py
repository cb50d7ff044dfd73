"""How long a campaign takes: before it is launched (its preview) and while it runs (its ETA).

A vantage point measures up to its max_parallel_runs runs at once, never two of one endpoint
(docs/workers.md), so its share of a launch takes its runs' total time over that limit, or its
busiest endpoint's runs one after the other if longer; a launch takes as long as its busiest
vantage point. A run's time is, in this order of preference:

1. the median duration (started to finished) of earlier succeeded runs with the same
   parameters: endpoint, test file, vantage point and every run parameter;
2. else the bytes its readers ask for (as a run's bytes_read counts them, a copy's fraction
   too, not its whole file; a write's or a third-party copy's whole files) at the median
   throughput of the endpoint's earlier runs of the same operation most like it (the same
   method, pattern, read size and clients; else the same method, pattern and read size;
   else the same method and read size; else the same method: never another method's, as a
   copy streams what small direct reads wait for), plus their median overhead (started to
   finished, less the engine's wall time: start-up, preflight, ingest); a metadata storm
   (stat, open, list) at a target rate: its operations at that rate (it moves no bytes);
3. else unknown.

Each run's engine deadline bounds it from above (docs/engine.md, Deadlines), with the
endpoint's last preflight round-trip time (none known: the minimum round trip).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from webapp.campaigns.cron import CronError, parse_cron
from webapp.campaigns.models import RUN_PARAMETERS, Campaign, MatrixRows, Run
from webapp.sites.models import VantagePoint
from workers.engine.params import METADATA_OPERATIONS, TPC_OPERATIONS, Operation, RunParams

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
        """What its clients get, as the preview counts it (copies: whole files)."""
        return run_moved_bytes(self.params, self.file_size)

    @property
    def read_bytes(self) -> int:
        """What its clients' readers ask for, as a run's bytes_read counts it (a copy too:
        the fraction it reads of its copy), and so its throughput; what a write writes, a
        third-party copy copies (whole files); none for a metadata storm."""
        params = self.params
        if params.operation != Operation.READ:
            return run_moved_bytes(params, self.file_size)
        return params.clients * params.files * params.planned_bytes(self.file_size)

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


def run_moved_bytes(params: RunParams, file_size: int, *, trace_bytes: int | None = None) -> int:
    """The bytes a run moves: what its readers get (copies: whole files), what its writers
    write (file_size per file), the test files a third-party copy copies; none for metadata
    operations; a replay's clients each what the recorded job read (`trace_bytes`, the
    campaign's Trace.bytes_read, when the caller knows it). `file_size` is the test file's."""
    operation = params.operation
    if operation == Operation.REPLAY and trace_bytes is not None:
        return params.clients * trace_bytes
    if operation == Operation.WRITE:
        return params.clients * params.files * params.file_size
    if operation in TPC_OPERATIONS:
        return params.clients * params.files * file_size
    if operation in METADATA_OPERATIONS:
        return 0
    return params.run_delivered_bytes(file_size)


@dataclass(frozen=True)
class RunEstimate:
    """How long one run should take (None: unknown), from what, and at most."""

    seconds: float | None
    source: str  # "same-parameters", "throughput" or "unknown"
    upper_s: float


@dataclass(frozen=True)
class _EndpointRun:
    operation: str
    method: str
    pattern: str
    read_size: int
    clients: int
    throughput_mbps: float
    overhead_s: float | None  # started to finished, less the engine's wall time


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
        params = plan.params
        if params.operation in METADATA_OPERATIONS:
            # No bytes to go by: a target rate says how long its operations take at least.
            return params.ops / params.rate if params.rate > 0 else None
        # A write's throughput says nothing of a read's (nor a copy's of either).
        runs = [
            r
            for r in self.endpoint_runs.get(plan.endpoint_id, [])
            if r.operation == params.operation
        ]
        like: list[_EndpointRun] = []
        for key in _LIKENESS:
            wanted = key(params.method, params.pattern, params.read_size, params.clients)
            like = [r for r in runs if key(r.method, r.pattern, r.read_size, r.clients) == wanted]
            if like:
                break
        if not like:
            return None
        rate_bps = statistics.median(r.throughput_mbps for r in like) * 1e6
        overheads = [r.overhead_s for r in like if r.overhead_s is not None]
        # Bytes in the unit of the throughput (bytes_read / wall_s): a copy's whole file here
        # made its time 100 times too long at a fraction of 0.01.
        return plan.read_bytes / rate_bps + (statistics.median(overheads) if overheads else 0.0)


# Which earlier runs of an endpoint are like a planned one, most alike first: all share its
# method (a copy's throughput says nothing of small direct reads, and the other way round).
_LIKENESS: tuple[Callable[[str, str, int, int], tuple[object, ...]], ...] = (
    lambda method, pattern, read_size, clients: (method, pattern, read_size, clients),
    lambda method, pattern, read_size, clients: (method, pattern, read_size),
    lambda method, pattern, read_size, clients: (method, read_size),
    lambda method, pattern, read_size, clients: (method,),
)


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
            "operation",
            "method",
            "pattern",
            "read_size",
            "clients",
            "throughput_mbps",
            "wall_s",
            "started_at",
            "finished_at",
            "result__preflight_rtt_s",
        )
    )
    by_endpoint: dict[int, list[_EndpointRun]] = defaultdict(list)
    rtt_s: dict[int, float] = {}
    for row in rows:
        endpoint_id, operation, method, pattern, read_size, clients, throughput, wall = row[:8]
        started, finished, rtt = row[8:]
        assert throughput is not None  # filtered on throughput_mbps__gt
        overhead = _overhead_s(wall, started, finished)
        by_endpoint[endpoint_id].append(
            _EndpointRun(operation, method, pattern, read_size, clients, throughput, overhead)
        )
        if isinstance(rtt, int | float) and endpoint_id not in rtt_s:
            rtt_s[endpoint_id] = float(rtt)
    return by_endpoint, rtt_s


def _overhead_s(
    wall_s: float | None, started_at: datetime | None, finished_at: datetime | None
) -> float | None:
    """What a run took beyond the engine's wall time (start-up, preflight, ingest)."""
    if wall_s is None or started_at is None or finished_at is None:
        return None
    return max(0.0, (finished_at - started_at).total_seconds() - wall_s)


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
    return planned_durations([plans], now=now)[0]


def planned_durations(
    groups: Sequence[Sequence[PlannedRun]], *, now: datetime | None = None
) -> list[CampaignDuration]:
    """How long each group of planned runs (a campaign's launch each) would take: the
    earlier runs are read once for all of them (the advice's suggested campaigns)."""
    every = [plan for plans in groups for plan in plans]
    estimates = iter(runs_estimate(every, now=now))
    limits = _parallel_limits(plan.vantage_point_id for plan in every)
    return [_duration(plans, [next(estimates) for _ in plans], limits) for plans in groups]


def _duration(
    plans: Sequence[PlannedRun], estimates: Sequence[RunEstimate], limits: dict[int | None, int]
) -> CampaignDuration:
    sources = [e.source for e in estimates]
    known = len(sources) - sources.count("unknown")
    placed = [(plan.vantage_point_id, plan.endpoint_id) for plan in plans]
    seconds = [estimate.seconds or 0.0 for estimate in estimates]
    return CampaignDuration(
        runs=len(plans),
        seconds=_busiest_s(zip(placed, seconds, strict=True), limits) if known else None,
        upper_s=_busiest_s(zip(placed, (e.upper_s for e in estimates), strict=True), limits),
        same_parameters=sources.count("same-parameters"),
        throughput=sources.count("throughput"),
        unknown=sources.count("unknown"),
    )


def _parallel_limits(vantage_point_ids: Iterable[int | None]) -> dict[int | None, int]:
    """Each vantage point's max_parallel_runs (1 for one not saved yet)."""
    ids = {pk for pk in vantage_point_ids if pk is not None}
    rows = VantagePoint.objects.filter(pk__in=ids).values_list("pk", "max_parallel_runs")
    return dict(rows)


def _busiest_s(
    runs: Iterable[tuple[tuple[int | None, int], float]], limits: dict[int | None, int]
) -> float:
    """How long the busiest vantage point takes over `runs` ((vantage point, endpoint),
    seconds): its runs' total over its max_parallel_runs, or its busiest endpoint's runs one
    after the other if that is longer (never two runs of one endpoint at once)."""
    total: dict[int | None, float] = defaultdict(float)
    endpoint_total: dict[tuple[int | None, int], float] = defaultdict(float)
    for (vantage_point_id, endpoint_id), seconds in runs:
        total[vantage_point_id] += seconds
        endpoint_total[vantage_point_id, endpoint_id] += seconds
    serial: dict[int | None, float] = defaultdict(float)
    for (vantage_point_id, _), seconds in endpoint_total.items():
        serial[vantage_point_id] = max(serial[vantage_point_id], seconds)
    return max((max(t / limits.get(vp, 1), serial[vp]) for vp, t in total.items()), default=0.0)


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
    remaining: list[tuple[tuple[int | None, int], float]] = []
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
        remaining.append(((run.vantage_point_id, run.endpoint_id), seconds))
    done = ended.count()
    limits = _parallel_limits(run.vantage_point_id for run in active)
    return CampaignEta(
        launched_at=launched_at,
        launch_runs=done + len(active),
        done=done,
        active=len(active),
        remaining_s=None if unknown else _busiest_s(remaining, limits),
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


# The period a schedule's cost is counted over ("per month"): the next 30 days.
COST_DAYS = 30


@dataclass(frozen=True)
class ScheduleCost:
    """What schedules cost over the next COST_DAYS days ("a month") and an average night:
    bytes read and run-minutes, from their runs' estimates (bytes as the preview counts them;
    run time the estimate of each run, its runs without one counted in `unknown_runs`)."""

    launches_per_month: int
    bytes_per_month: int
    run_s_per_month: float  # a lower bound when unknown_runs
    unknown_runs: int  # runs of a launch with no estimate

    @property
    def launches_per_night(self) -> float:
        return self.launches_per_month / COST_DAYS

    @property
    def bytes_per_night(self) -> int:
        return round(self.bytes_per_month / COST_DAYS)

    @property
    def run_minutes_per_month(self) -> float:
        return self.run_s_per_month / 60

    @property
    def run_minutes_per_night(self) -> float:
        return self.run_minutes_per_month / COST_DAYS

    def to_json(self) -> dict[str, Any]:
        return {
            "launches_per_night": round(self.launches_per_night, 3),
            "launches_per_month": self.launches_per_month,
            "bytes_per_night": self.bytes_per_night,
            "bytes_per_month": self.bytes_per_month,
            "run_minutes_per_night": round(self.run_minutes_per_night, 1),
            "run_minutes_per_month": round(self.run_minutes_per_month, 1),
            "unknown_runs": self.unknown_runs,
        }


def campaign_cost(
    *, campaign: Campaign, now: datetime | None = None, site_id: int | None = None
) -> ScheduleCost:
    """What the campaign's schedule costs (nothing while paused or unscheduled); of its runs
    on `site_id`'s endpoints only, if given."""
    now = now or timezone.now()
    launches = _launches_within(campaign, now=now, days=COST_DAYS)
    plans = campaign_planned_runs(campaign=campaign) if launches else []
    if site_id is not None:
        on_site = set(campaign.endpoints.filter(site_id=site_id).values_list("pk", flat=True))
        plans = [plan for plan in plans if plan.endpoint_id in on_site]
    estimates = runs_estimate(plans, now=now)
    return ScheduleCost(
        launches_per_month=launches,
        bytes_per_month=launches * sum(plan.planned_bytes for plan in plans),
        run_s_per_month=launches * sum(estimate.seconds or 0.0 for estimate in estimates),
        unknown_runs=sum(estimate.seconds is None for estimate in estimates),
    )


def site_schedule_cost(*, site_id: int, now: datetime | None = None) -> ScheduleCost:
    """What the running schedules of the campaigns measuring the site cost, counting their
    runs on its endpoints."""
    now = now or timezone.now()
    campaigns = (
        Campaign.objects.filter(endpoints__site_id=site_id, schedule_paused_at__isnull=True)
        .exclude(schedule="")
        .distinct()
    )
    costs = [campaign_cost(campaign=c, now=now, site_id=site_id) for c in campaigns]
    return ScheduleCost(
        launches_per_month=sum(cost.launches_per_month for cost in costs),
        bytes_per_month=sum(cost.bytes_per_month for cost in costs),
        run_s_per_month=sum(cost.run_s_per_month for cost in costs),
        unknown_runs=sum(cost.unknown_runs for cost in costs),
    )


def _launches_within(campaign: Campaign, *, now: datetime, days: int) -> int:
    """How many slots its schedule has in the next `days` days (0 paused or unscheduled)."""
    if not campaign.schedule or campaign.schedule_paused:
        return 0
    try:
        cron = parse_cron(campaign.schedule)
    except CronError:
        return 0
    per_day = len(cron.hours) * len(cron.minutes)
    start = now.date()
    return sum(per_day for offset in range(days) if cron.matches_day(start + timedelta(offset)))
