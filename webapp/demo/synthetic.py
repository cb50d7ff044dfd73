"""Synthetic history for demos and benchmarks: sites, endpoints, nightly campaigns and their
finished runs, with figures that behave like measurements (README: "Synthetic history").

Every row it makes is named with SYNTHETIC_PREFIX, so `history_clear` removes exactly those.
The endpoints are made disabled: their campaigns keep a nightly schedule (as real probes
would have), but a slot launches nothing against hosts that do not exist.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import transaction

from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import RUN_PARAMETERS, SHARED, Campaign, Run, ScheduledLaunch
from webapp.core import sql
from webapp.demo.planted import Plan, plan_changes
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.engine.errors import ErrorClass
from workers.engine.params import needed_bytes

SYNTHETIC_PREFIX = "synth-"
SCHEDULE = "0 2 * * *"  # nightly, 02:00 UTC
MiB = 1 << 20
GiB = 1 << 30
FILE_SIZE = 2 * GiB
BATCH = 5000
TCP_WINDOW_B = 8 * MiB  # bounds one connection's rate at a distance: window / RTT
VECTOR_SIZE = 256
# The campaigns set their deadline, one figure for every synthetic run (the engine would
# derive one per run from its plan and the endpoint's round-trip time: docs/engine.md).
DEADLINE_S = 3600.0
ASYNC_DEPTH = 64

# (method, pattern, read_size, fraction, clients): the papers' questions, most asked first.
PARAMETER_SETS: tuple[tuple[str, str, int, float, int], ...] = (
    ("direct", "sequential", MiB, 1.0, 1),
    ("direct", "random", 4096, 0.01, 1),
    ("copy", "sequential", MiB, 1.0, 1),
    ("direct", "random", 64 * 1024, 0.1, 4),
    ("direct", "vector", 4096, 0.05, 1),
    ("direct", "async", 4096, 0.05, 1),
    ("stage", "sequential", MiB, 1.0, 4),
    ("direct", "sequential", 64 * 1024, 0.1, 16),
    ("direct", "skip", 64 * 1024, 0.25, 1),
    ("direct", "random", MiB, 0.1, 64),
)
MAX_PARAMETER_SETS = 200
PROTOCOLS = ("root", "https", "davs", "http")
PROTOCOL_RATE = {"root": 1.0, "https": 0.82, "davs": 0.78, "http": 0.9}
# Extra round trips to open: TLS for https/davs, a redirect for a redirector.
PROTOCOL_OPEN_RTTS = {"root": 2, "https": 4, "davs": 4, "http": 2}
PORTS = {"root": 1094, "https": 2880, "davs": 2880, "http": 8000}
TIERS = (("T1", 0.15), ("T2", 0.65), ("T3", 0.2))
TIER_RATE_MBPS = {"T1": (900, 2500), "T2": (250, 1200), "T3": (60, 300)}
STORAGE = ("dCache", "EOS", "DPM", "StoRM", "XRootD", "Echo")
STORAGE_OPEN_S = {"dCache": 0.045, "EOS": 0.02, "DPM": 0.03, "StoRM": 0.035, "XRootD": 0.01}
COUNTRIES = ("ch", "de", "uk", "fr", "it", "es", "nl", "us", "ca", "jp", "br", "pl")
VANTAGE_POINTS = (("cern", "Geneva, CH"), ("fnal", "Batavia, US"), ("ral", "Didcot, UK"))
# Why a failed run failed, weighted as an operator sees them.
SHORT_READ_MESSAGE = "the server closed the stream before the requested bytes"
FAILURE_CLASSES = (
    (ErrorClass.REFUSED, 0.3, "connection refused"),
    (ErrorClass.SERVER_ERROR, 0.3, "[ERROR] Server responded with an error: [3012] internal error"),
    (ErrorClass.AUTH, 0.15, "authentication failed: token expired"),
    (ErrorClass.NOT_FOUND, 0.1, "no such file or directory"),
    (ErrorClass.SHORT_READ, 0.1, SHORT_READ_MESSAGE),
    (ErrorClass.CHECKSUM, 0.05, "adler32 mismatch"),
)


@dataclass(frozen=True)
class Synthesized:
    """What `history_synthesize` made."""

    sites: int
    endpoints: int
    vantage_points: int
    campaigns: int
    runs: int
    first_night: date
    last_night: date
    truth: dict[str, Any] = field(default_factory=dict)  # what was planted (planted.py)


@dataclass
class SiteModel:
    """How a synthetic site behaves: its capacity, its storage's delays, how often it fails."""

    site: Site
    rate_mbps: float
    server_s: float  # per request
    open_s: float  # the storage's own open time
    fail_p: float
    timeout_p: float
    servers: list[str] = field(default_factory=list)


@dataclass
class EndpointModel:
    """One synthetic endpoint: its site, protocol, and the regression it will have, if any."""

    endpoint: Endpoint
    test_file: TestFile
    site: SiteModel
    regression: tuple[date, date, float, float] | None  # start, end, rate x, latency x
    outage: tuple[date, date] | None


@dataclass(frozen=True)
class World:
    """Everything the runs are drawn from."""

    rng: random.Random
    models: list[EndpointModel]
    points: list[VantagePoint]
    rtts: dict[tuple[int, int], float]  # (vantage point, site) -> round trip
    weather: dict[int, list[float]]  # endpoint -> rate factor per night
    repetitions: int
    plan: Plan  # the planted changes (webapp/demo/planted.py)


@dataclass(frozen=True)
class Cell:
    """One run to draw: a campaign's parameter set on one endpoint, from one vantage point."""

    campaign: Campaign
    params: tuple[str, str, int, float, int]
    model: EndpointModel
    point: VantagePoint
    launch: ScheduledLaunch
    repetition: int


def history_exists() -> bool:
    return Site.objects.filter(name__startswith=SYNTHETIC_PREFIX).exists()


def history_synthesize(
    *,
    endpoints: int,
    parameter_sets: int,
    nights: int,
    vantage_points: int = 1,
    repetitions: int = 1,
    seed: int = 1,
    last_night: date | None = None,
    progress: Callable[[int, int], None] | None = None,
    plant: bool = True,
) -> Synthesized:
    """Make the synthetic sites, endpoints, vantage points and campaigns, then finished runs
    (trigger=schedule): `repetitions` per night, endpoint, parameter set and vantage point;
    with `plant`, the changes of webapp/demo/planted.py in them (their truth returned)."""
    rng = random.Random(seed)
    last = last_night or _last_night(datetime.now(UTC))
    slots = [_slot(last - timedelta(days=n)) for n in range(nights - 1, -1, -1)]
    with transaction.atomic():
        models = _make_endpoints(rng, endpoints, first=slots[0].date(), last=last)
        points = _make_vantage_points(vantage_points)
        rtts = {(p.pk, m.site.site.pk): _rtt_s(rng) for p in points for m in models}
        sets = parameter_set_list(parameter_sets)
        campaigns = _make_campaigns(
            sets, [m.endpoint for m in models], points, first_slot=slots[0], repetitions=repetitions
        )
        first = slots[0].date()
        plan = plan_changes(
            random.Random(f"{seed}-plant"), models, points, first=first, last=last, plant=plant
        )
    weather = {
        m.endpoint.pk: _weather(random.Random(f"{seed}-{i}"), nights) for i, m in enumerate(models)
    }
    world = World(rng, models, points, rtts, weather, repetitions, plan)
    per_night = len(models) * len(points) * repetitions
    total = len(slots) * len(sets) * per_night
    written = 0
    for campaign, params in zip(campaigns, sets, strict=True):
        launches = _make_launches(campaign, slots, per_night)
        rows = _run_rows(world, campaign, params, launches)
        for batch in _batches(rows, BATCH):
            _insert_runs(batch)
            written += len(batch)
            if progress:
                progress(written, total)
    sites = {m.site.site.pk for m in models}
    truth = plan.truth(seed=seed, first=first, last=last)
    return Synthesized(
        len(sites), len(models), len(points), len(campaigns), written, first, last, truth
    )


def parameter_set_list(count: int) -> list[tuple[str, str, int, float, int]]:
    """The first `count` parameter sets: the papers' ten, then more of their product."""
    sets = list(PARAMETER_SETS[:count])
    extra = (
        (m, p, r, f, c)
        for c in (1, 4, 16)
        for r in (4096, 64 * 1024, MiB)
        for f in (0.01, 0.1, 1.0)
        for p in ("random", "sequential", "vector", "async", "skip")
        for m in ("direct", "copy")
        if not (m == "copy" and p != "sequential")
    )
    for params in extra:
        if len(sets) >= count:
            break
        if params not in sets:
            sets.append(params)
    return sets


def history_clear() -> int:
    """Delete every synthetic row (names starting with SYNTHETIC_PREFIX); the runs deleted."""
    campaigns = Campaign.objects.filter(name__startswith=SYNTHETIC_PREFIX)
    deleted = 0
    while True:
        ids = list(Run.objects.filter(campaign__in=campaigns).values_list("pk", flat=True)[:BATCH])
        if not ids:
            break
        Run.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
    campaigns.delete()
    Endpoint.objects.filter(name__startswith=SYNTHETIC_PREFIX).delete()
    Site.objects.filter(name__startswith=SYNTHETIC_PREFIX).delete()
    VantagePoint.objects.filter(name__startswith=SYNTHETIC_PREFIX).delete()
    return deleted


def _last_night(now: datetime) -> date:
    """The date of the latest nightly slot that has passed."""
    today = now.date()
    return today if now >= _slot(today) else today - timedelta(days=1)


def _slot(night: date) -> datetime:
    return datetime.combine(night, time(2, 0), tzinfo=UTC)


def _make_endpoints(
    rng: random.Random, count: int, *, first: date, last: date
) -> list[EndpointModel]:
    models: list[EndpointModel] = []
    site_count = max(1, math.ceil(count / len(PROTOCOLS)))
    sites = [_make_site(rng, i) for i in range(site_count)]
    for i in range(count):
        site = sites[i % site_count]
        protocol = PROTOCOLS[(i // site_count) % len(PROTOCOLS)]
        endpoint = Endpoint.objects.create(
            site=site.site,
            name=f"{site.site.name}-{protocol}",
            protocol=protocol,
            base_url=f"{protocol}://{_host(site.site)}:{PORTS[protocol]}",
            role=Endpoint.Role.REDIRECTOR if protocol == "root" and i % 7 == 3 else "data",
            enabled=False,
        )
        test_file = TestFile.objects.create(
            endpoint=endpoint,
            path="/store/test/fedprobe/synth-2G",
            size=FILE_SIZE,
            adler32=f"{rng.getrandbits(32):08x}",
            is_default=True,
        )
        models.append(EndpointModel(endpoint, test_file, site, _regression(rng, first, last), None))
    _add_outages(rng, models, first, last)
    return models


def _make_site(rng: random.Random, index: int) -> SiteModel:
    tier = rng.choices([t for t, _ in TIERS], [w for _, w in TIERS])[0]
    country = COUNTRIES[index % len(COUNTRIES)]
    storage = rng.choice(STORAGE)
    site = Site.objects.create(
        name=f"{SYNTHETIC_PREFIX}{tier.lower()}-{country}-{index:02d}",
        tier=tier,
        storage_system=storage,
        location=f"synthetic, {country.upper()}",
    )
    low, high = TIER_RATE_MBPS[tier]
    model = SiteModel(
        site=site,
        rate_mbps=rng.uniform(low, high),
        server_s=rng.lognormvariate(math.log(250e-6), 0.4),
        open_s=STORAGE_OPEN_S.get(storage, 0.025) * rng.uniform(0.7, 1.5),
        fail_p=rng.uniform(0.002, 0.02),
        timeout_p=rng.uniform(0.001, 0.01),
    )
    model.servers = [
        f"{name}.{_host(site)}" for name in ("ds01", "ds02", "ds03")[: rng.randint(1, 3)]
    ]
    return model


def _host(site: Site) -> str:
    return f"{site.name.removeprefix(SYNTHETIC_PREFIX)}.synth.example"


def _regression(
    rng: random.Random, first: date, last: date
) -> tuple[date, date, float, float] | None:
    """About one endpoint in twelve gets slower from a date on, some recover weeks later."""
    days = (last - first).days
    if days < 2 or rng.random() > 1 / 12:
        return None
    start = first + timedelta(days=rng.randint(days // 3, days - 1))
    end = last + timedelta(days=1)
    if rng.random() < 0.4:
        end = min(end, start + timedelta(days=rng.randint(5, 60)))
    return start, end, rng.uniform(0.3, 0.7), rng.uniform(1.5, 4.0)


def _add_outages(rng: random.Random, models: list[EndpointModel], first: date, last: date) -> None:
    """A site or two is down for a few nights: every run there fails (refused)."""
    days = (last - first).days
    if days < 10 or not models:
        return
    sites = sorted({m.site.site.pk for m in models})
    for site_pk in rng.sample(sites, k=min(2, len(sites))):
        start = first + timedelta(days=rng.randint(0, days - 3))
        span = (start, start + timedelta(days=rng.randint(1, 3)))
        for model in models:
            if model.site.site.pk == site_pk:
                model.outage = span


def _make_vantage_points(count: int) -> list[VantagePoint]:
    points = []
    for i in range(count):
        name, location = VANTAGE_POINTS[i] if i < len(VANTAGE_POINTS) else (f"vp-{i}", "")
        points.append(
            VantagePoint.objects.create(
                name=f"{SYNTHETIC_PREFIX}{name}",
                location=location,
                description="synthetic history (manage.py history synthesize)",
            )
        )
    return points


def _rtt_s(rng: random.Random) -> float:
    """Round trip from a vantage point to a site: same campus, same continent, or across."""
    band = rng.choices([(0.0005, 0.005), (0.008, 0.04), (0.08, 0.3)], [0.2, 0.55, 0.25])[0]
    return rng.uniform(*band)


def _make_campaigns(
    sets: Sequence[tuple[str, str, int, float, int]],
    endpoints: list[Endpoint],
    points: list[VantagePoint],
    *,
    first_slot: datetime,
    repetitions: int,
) -> list[Campaign]:
    campaigns = []
    for method, pattern, read_size, fraction, clients in sets:
        campaign = Campaign.objects.create(
            name=f"{SYNTHETIC_PREFIX}nightly {method} {pattern} {_size(read_size)} "
            f"x{fraction:g} {clients}c",
            description="Synthetic history (manage.py history synthesize): not measured.",
            methods=[method],
            patterns=[pattern],
            read_sizes=[read_size],
            fractions=[fraction],
            clients=[clients],
            repetitions=repetitions,
            deadline_s=int(DEADLINE_S),
            depth=ASYNC_DEPTH,
            vector_size=VECTOR_SIZE,
            schedule=SCHEDULE,
        )
        campaign.endpoints.set(endpoints)
        campaign.vantage_points.set(points)
        campaigns.append(campaign)
    Campaign.objects.filter(pk__in=[c.pk for c in campaigns]).update(
        created_at=first_slot - timedelta(days=1)
    )
    return campaigns


def _size(read_size: int) -> str:
    return f"{read_size // MiB}M" if read_size >= MiB else f"{read_size // 1024}k"


def _make_launches(campaign: Campaign, slots: list[datetime], runs: int) -> list[ScheduledLaunch]:
    return ScheduledLaunch.objects.bulk_create(
        [
            ScheduledLaunch(
                campaign=campaign, slot=s, launched_at=s + timedelta(seconds=1), run_count=runs
            )
            for s in slots
        ]
    )


def _batches(rows: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass(frozen=True)
class Conditions:
    """What one run meets: the distance, the site's rate and delays that night."""

    rtt_s: float
    rate_mbps: float
    server_s: float
    open_s: float
    protocol: str
    redirector: bool
    # A planted change of what the server gives each stream (webapp/demo/planted.py): it
    # shows even where the TCP window bounds the rate.
    stream_factor: float = 1.0


# A run's figures (run_figures makes them; null when nothing was measured): every run metric
# of the registry, then the Run columns that are not metrics.
FIGURES = (*METRICS, "ops", "latency_max_us", "bytes_requested", "bytes_read")
RUN_COLUMNS = (
    "campaign_id",
    "endpoint_id",
    "test_file_id",
    "vantage_point_id",
    *(p.name for p in RUN_PARAMETERS),
    "repetition",
    "status",
    "trigger",
    "scheduled_launch_id",
    "cancel_requested",
    "resent_count",
    "worker",
    "created_at",
    "started_at",
    "finished_at",
    *FIGURES,
    "served_by",
    "errors",
    "server_version",
    "client_version",
)


def _weather(rng: random.Random, nights: int) -> list[float]:
    """An endpoint's rate factor night by night: a slow seasonal drift, busier weekdays
    and day-to-day noise."""
    phase = rng.uniform(0, 2 * math.pi)
    factors = []
    level = 0.0
    for night in range(nights):
        level = 0.7 * level + rng.gauss(0, 0.06)  # bad nights come in runs
        season = 1 + 0.08 * math.sin(2 * math.pi * night / 91 + phase)
        factors.append(math.exp(level) * season)
    return factors


def _run_rows(
    world: World,
    campaign: Campaign,
    params: tuple[str, str, int, float, int],
    launches: list[ScheduledLaunch],
) -> Iterator[tuple[Any, ...]]:
    """The campaign's runs, night by night; every campaign meets the same weather, so the
    parameter sets of one endpoint move together as real ones do."""
    for n, launch in enumerate(launches):
        night = launch.slot.date()
        busy = 0.88 if launch.slot.weekday() < 5 else 1.0
        queue_s = 0.0
        for model, point in itertools.product(world.models, world.points):
            conditions = _conditions(model, world.rtts[point.pk, model.site.site.pk], night)
            rate = conditions.rate_mbps * world.weather[model.endpoint.pk][n] * busy
            planted = world.plan.rate_factor(model.endpoint.pk, night)
            conditions = Conditions(
                **{**vars(conditions), "rate_mbps": rate, "stream_factor": planted}
            )
            for repetition in range(world.repetitions):
                cell = Cell(campaign, params, model, point, launch, repetition)
                row, wall_s = _run_row(world.rng, cell, conditions, world.plan)
                yield _timed(row, launch.slot, queue_s, wall_s)
                queue_s += min(wall_s, 60.0) / 8  # a few workers per vantage point


def _conditions(model: EndpointModel, rtt_s: float, night: date) -> Conditions:
    rate, server_s = model.site.rate_mbps, model.site.server_s
    if model.regression and model.regression[0] <= night < model.regression[1]:
        rate *= model.regression[2]
        server_s *= model.regression[3]
    return Conditions(
        rtt_s=rtt_s,
        rate_mbps=rate,
        server_s=server_s,
        open_s=model.site.open_s,
        protocol=model.endpoint.protocol,
        redirector=model.endpoint.role == Endpoint.Role.REDIRECTOR,
    )


def _run_row(
    rng: random.Random, cell: Cell, conditions: Conditions, plan: Plan
) -> tuple[dict[str, Any], float]:
    model, point, launch = cell.model, cell.point, cell.launch
    method, pattern, read_size, fraction, clients = cell.params
    row: dict[str, Any] = {
        "campaign_id": cell.campaign.pk,
        "endpoint_id": model.endpoint.pk,
        "test_file_id": model.test_file.pk,
        "vantage_point_id": point.pk,
        "operation": "read",  # the synthetic history reads
        "method": method,
        "pattern": pattern,
        "read_size": read_size,
        "fraction": fraction,
        "clients": clients,
        **{p.name: getattr(cell.campaign, p.name) for p in SHARED},
        "scheduled_launch_id": launch.pk,
        "repetition": cell.repetition,
        "worker": f"celery@{point.name}-worker{rng.randint(1, 4)}",
        "served_by": [],
        "errors": [],
        "server_version": "",
    }
    night = launch.slot.date()
    row["client_version"] = plan.client_version(
        model.endpoint.pk, model.endpoint.protocol, method, night
    )
    planted_failure = plan.failure(model.endpoint.pk, point.pk, night)
    if planted_failure:
        status = "timeout" if planted_failure is ErrorClass.TIMEOUT else "failed"
        return _failed(rng, row, status, clients, planted_failure)
    outcome = _outcome(rng, model, conditions, night, clients)
    if outcome in ("failed", "timeout"):
        return _failed(rng, row, outcome, clients)
    row["server_version"] = plan.server_version(model.endpoint.pk, night)
    figures = run_figures(rng, cell.params, conditions)
    if figures["wall_s"] > DEADLINE_S:
        return _failed(rng, row, "timeout", clients)
    row.update(figures, status="succeeded", served_by=sorted(rng.sample(model.site.servers, 1)))
    if outcome == "partial":
        _partial(rng, row, clients, needed_bytes(fraction, FILE_SIZE))
    return row, figures["wall_s"]


def _outcome(
    rng: random.Random, model: EndpointModel, conditions: Conditions, night: date, clients: int
) -> str:
    if model.outage and model.outage[0] <= night < model.outage[1]:
        return "failed"
    regressed = model.regression and model.regression[0] <= night < model.regression[1]
    timeout_p = model.site.timeout_p * (1 + 5 * conditions.rtt_s) * (3 if regressed else 1)
    draw = rng.random()
    if draw < timeout_p:
        return "timeout"
    if draw < timeout_p + model.site.fail_p:
        return "failed"
    if clients > 1 and draw < timeout_p + 1.5 * model.site.fail_p:
        return "partial"
    return "succeeded"


def _failed(
    rng: random.Random,
    row: dict[str, Any],
    status: str,
    clients: int,
    planted: ErrorClass | None = None,
) -> tuple[dict[str, Any], float]:
    if status == "timeout":
        message = f"no answer within the deadline ({DEADLINE_S:.0f} s)"
        errors = [
            {"class": ErrorClass.TIMEOUT.value, "message": message, "client": c}
            for c in range(clients)
        ]
        wall_s = DEADLINE_S
    else:
        error_class, message = _planted_failure(planted) if planted else _failure_class(rng)
        errors = [
            {"class": error_class.value, "message": message, "client": c} for c in range(clients)
        ]
        wall_s = rng.uniform(0.05, 5.0)
    row.update(status=status, errors=errors, **dict.fromkeys(FIGURES))
    return row, wall_s


def _planted_failure(error_class: ErrorClass) -> tuple[ErrorClass, str]:
    messages = {c: m for c, _, m in FAILURE_CLASSES}
    return error_class, messages.get(error_class, f"{error_class.value} failure")


def _failure_class(rng: random.Random) -> tuple[ErrorClass, str]:
    weights = [w for _, w, _ in FAILURE_CLASSES]
    error_class, _, message = rng.choices(FAILURE_CLASSES, weights)[0]
    return error_class, message


def _partial(rng: random.Random, row: dict[str, Any], clients: int, needed: int) -> None:
    """One client broke off: the run keeps what the others read."""
    client = rng.randrange(clients)
    lost = int(needed * rng.uniform(0.1, 0.9))
    row["status"] = "partial"
    wire_per_byte = row["bytes_wire"] / row["bytes_read"]
    row["bytes_read"] -= lost
    row["bytes_wire"] -= int(lost * wire_per_byte)
    row["throughput_mbps"] = round(row["bytes_read"] / row["wall_s"] / 1e6, 3)
    row["errors"] = [
        {"class": ErrorClass.SHORT_READ.value, "message": SHORT_READ_MESSAGE, "client": client}
    ]


def run_figures(
    rng: random.Random, params: tuple[str, str, int, float, int], conditions: Conditions
) -> dict[str, Any]:
    """A run's aggregates (FIGURES), consistent with each other: bytes from the fraction and
    file size, time from round trips, request sizes and the rate each client gets."""
    method, pattern, read_size, fraction, clients = params
    needed = needed_bytes(fraction, FILE_SIZE)
    client_bps = _client_rate_bps(conditions, clients) * rng.lognormvariate(0, 0.06)
    server_s = conditions.server_s * (1 + clients / 32) * rng.lognormvariate(0, 0.1)
    request_s = conditions.rtt_s + read_size / client_bps + server_s
    open_rtts = PROTOCOL_OPEN_RTTS[conditions.protocol] + (2 if conditions.redirector else 0)
    open_s = conditions.open_s + open_rtts * conditions.rtt_s
    requests = math.ceil(needed / read_size)
    if method == "direct":
        ops, read_s, op_s = _direct_read(
            pattern=pattern,
            requests=requests,
            read_size=read_size,
            request_s=request_s,
            client_bps=client_bps,
            rtt_s=conditions.rtt_s,
            server_s=server_s,
        )
        ttfb_s = open_s + request_s
        wire = needed
    else:
        ops, op_s = requests, 8e-6 + read_size / 4e9
        copy_s = FILE_SIZE / client_bps + 3 * conditions.rtt_s
        local_s = ops * op_s
        read_s = copy_s + (0.2 * local_s if method == "stage" else local_s)
        ttfb_s = open_s + conditions.rtt_s + server_s
        wire = FILE_SIZE
    spread = 1 + rng.uniform(0, 0.06) * math.log2(clients + 1)
    wall_s = (open_s + read_s + conditions.rtt_s) * spread
    p50 = op_s * rng.lognormvariate(0, 0.05)
    p90 = p50 * rng.uniform(1.15, 1.6)
    p99 = p90 * rng.uniform(1.4, 3.0)
    return {
        "wall_s": round(wall_s, 6),
        "open_s": round(open_s * rng.lognormvariate(0, 0.08), 6),
        "ttfb_s": round(ttfb_s * rng.lognormvariate(0, 0.08), 6),
        "throughput_mbps": round(clients * needed / wall_s / 1e6, 3),
        "ops": clients * ops,
        "latency_p50_us": round(p50 * 1e6, 1),
        "latency_p90_us": round(p90 * 1e6, 1),
        "latency_p99_us": round(p99 * 1e6, 1),
        "latency_max_us": round(p99 * rng.uniform(1.2, 5.0) * 1e6, 1),
        "bytes_requested": clients * needed,
        "bytes_read": clients * needed,
        "bytes_wire": clients * wire,
        "cpu_s": round(clients * (0.04 + ops * 25e-6 + (needed + wire) * 0.2e-9), 6),
    }


def _client_rate_bps(conditions: Conditions, clients: int) -> float:
    """Each client's share of the site (which copes less well with many clients), at most
    what one TCP connection carries over the distance."""
    efficiency = 1 / (1 + 0.4 * (clients / 64) ** 2)
    share = conditions.rate_mbps * 1e6 * efficiency / clients
    stream_bps = min(share, TCP_WINDOW_B / conditions.rtt_s) * conditions.stream_factor
    return stream_bps * PROTOCOL_RATE[conditions.protocol]


def _direct_read(
    *,
    pattern: str,
    requests: int,
    read_size: int,
    request_s: float,
    client_bps: float,
    rtt_s: float,
    server_s: float,
) -> tuple[int, float, float]:
    """(operations, read time, one operation's latency) of a direct read: synchronous
    patterns pay a round trip per request; vector and async reads hide most of them."""
    if pattern == "vector":
        ops = math.ceil(requests / VECTOR_SIZE)
        op_s = rtt_s + VECTOR_SIZE * read_size / client_bps + server_s * VECTOR_SIZE / 16
        return ops, ops * op_s, op_s
    if pattern == "async":
        transfer_s = requests * (read_size / client_bps + server_s / 8)
        return (
            requests,
            max(transfer_s, requests * request_s / ASYNC_DEPTH) + rtt_s,
            request_s * 1.3,
        )
    return requests, requests * request_s, request_s


def _timed(row: dict[str, Any], slot: datetime, queue_s: float, wall_s: float) -> tuple[Any, ...]:
    """The row as RUN_COLUMNS, created at its launch, started as its worker got to it."""
    created = slot + timedelta(seconds=1)
    started = created + timedelta(seconds=queue_s)
    row.update(
        trigger=Run.Trigger.SCHEDULE.value,
        cancel_requested=False,
        resent_count=0,
        created_at=created,
        started_at=started,
        finished_at=started + timedelta(seconds=wall_s + 0.5),
    )
    return tuple(row[column] for column in RUN_COLUMNS)


def _insert_runs(rows: list[tuple[Any, ...]]) -> None:
    json_at = [RUN_COLUMNS.index("served_by"), RUN_COLUMNS.index("errors")]
    sql.insert_rows(
        table=Run._meta.db_table,
        columns=RUN_COLUMNS,
        rows=[_with_json(row, json_at) for row in rows],
    )


def _with_json(row: tuple[Any, ...], json_at: list[int]) -> tuple[Any, ...]:
    values = list(row)
    for i in json_at:
        values[i] = json.dumps(values[i])
    return tuple(values)
