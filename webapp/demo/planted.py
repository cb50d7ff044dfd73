"""What `history synthesize` plants in the synthetic history for the watch to find, and the
ground truth of it (README "Synthetic history", docs/watch.md "Ground truth").

Each planted change is a `PlantedChange`: steps of several sizes (worse and better), slow
drifts, single bad nights (which must not alert), recoveries, a server version change at a
step (every second one a change of the client library's version instead), a vantage point's
outage, a protocol-wide credential expiry and a declared downtime.
The endpoint-level changes act on the rate the endpoint gives each stream, from every
vantage point (so a change of x% moves the throughput of bandwidth-bound reads by x%, even
where the TCP window bounds them); the group ones make the runs they cover fail. `--truth
FILE` writes them as JSON.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from webapp.sites.models import Downtime, VantagePoint
from workers.engine.errors import ErrorClass

if TYPE_CHECKING:
    from webapp.demo.synthetic import EndpointModel

# Nights a history needs before anything is planted: a band of recent nights, the change,
# and nights after it to confirm.
PLANT_MIN_NIGHTS = 45
PLANTED_SHARE = 0.4  # of the endpoints without the generator's own random regression
STORAGE_VERSIONS = {
    "dCache": "9.2",
    "EOS": "5.2",
    "DPM": "1.15",
    "StoRM": "1.11",
    "XRootD": "5.6",
    "Echo": "5.5",
}
CREDENTIAL_PROTOCOL = "https"
# The client library's version the runs of each protocol report (Run.client_version), and
# how a run names it for reads in place and for copies (workers/engine/backends).
CLIENT_VERSIONS = {"root": "5.6.1", "https": "0.28.1", "davs": "0.28.1", "http": "0.28.1"}
_HTTPX = "httpx {} (httpcore 1.0.9)"
CLIENT_NAMES = {
    "root": ("xrootd {} (Python bindings)", "xrdcp v{}"),
    "https": (_HTTPX, _HTTPX),
    "davs": (_HTTPX, _HTTPX),
    "http": (_HTTPX, _HTTPX),
}

# (kind, rate factor, nights it lasts or ramps over): the endpoint-level scenarios, in turn.
SCENARIOS: tuple[tuple[str, float, int], ...] = (
    ("step", 0.9, 0),
    ("step", 0.8, 0),
    ("step", 0.5, 0),
    ("step", 1.1, 0),
    ("step", 1.2, 0),
    ("step", 1.5, 0),
    ("drift", 0.6, 30),
    ("bad-night", 0.35, 1),
    ("recovery", 0.6, 12),
    ("version-change", 0.75, 0),
)


@dataclass(frozen=True)
class PlantedChange:
    """One planted change and what it covers: an endpoint (of a site), or every endpoint of
    a protocol, a site or seen from a vantage point; `end` is exclusive, None = still on."""

    kind: str
    start: date
    end: date | None
    rate_factor: float = 1.0  # the stream rate at full effect (1 = unchanged)
    ramp_nights: int = 0  # a drift reaches its full effect after these
    server_factor: float = 1.0  # the server's time per request
    endpoint: str | None = None
    site: str | None = None
    protocol: str | None = None
    vantage_point: str | None = None
    error_class: str | None = None  # the runs it covers fail with this
    server_version: tuple[str, str] | None = None  # (before, after) at start
    client_version: tuple[str, str] | None = None  # the client library's (before, after)

    def covers(self, night: date) -> bool:
        return self.start <= night and (self.end is None or night < self.end)

    def to_json(self) -> dict[str, Any]:
        values = asdict(self)
        values["start"] = self.start.isoformat()
        values["end"] = self.end.isoformat() if self.end else None
        values["change_pct"] = round((self.rate_factor - 1) * 100, 1)
        return values


_Failure = tuple[PlantedChange, frozenset[int], int | None, ErrorClass]


@dataclass
class Plan:
    """The planted changes and the lookups the run generator makes for every run."""

    changes: list[PlantedChange] = field(default_factory=list)
    versions: dict[int, str] = field(default_factory=dict)  # endpoint -> server version
    _by_endpoint: dict[int, list[PlantedChange]] = field(default_factory=dict)
    # (change, endpoints covered, vantage point or None = all, the runs' error class)
    _failures: list[_Failure] = field(default_factory=list)

    def rate_factor(self, endpoint_pk: int, night: date) -> float:
        factor = 1.0
        for change in self._by_endpoint.get(endpoint_pk, ()):
            factor *= _effect(change, night)
        return factor

    def failure(self, endpoint_pk: int, point_pk: int, night: date) -> ErrorClass | None:
        for change, endpoints, point, error_class in self._failures:
            if change.covers(night) and endpoint_pk in endpoints and point in (None, point_pk):
                return error_class
        return None

    def server_version(self, endpoint_pk: int, night: date) -> str:
        for change in self._by_endpoint.get(endpoint_pk, ()):
            if change.server_version and night >= change.start:
                return change.server_version[1]
        return self.versions.get(endpoint_pk, "")

    def client_version(self, endpoint_pk: int, protocol: str, method: str, night: date) -> str:
        """What a run of `method` on the endpoint reports as its client (client_name)."""
        version = CLIENT_VERSIONS[protocol]
        for change in self._by_endpoint.get(endpoint_pk, ()):
            if change.client_version and night >= change.start:
                version = change.client_version[1]
        return client_name(protocol, method, version)

    def truth(self, *, seed: int, first: date, last: date) -> dict[str, Any]:
        return {
            "seed": seed,
            "first_night": first.isoformat(),
            "last_night": last.isoformat(),
            "changes": [c.to_json() for c in self.changes],
        }


def client_name(protocol: str, method: str, version: str) -> str:
    """The client a run names: "xrootd 5.6.1 (Python bindings)" for direct reads over
    root://, "xrdcp v5.6.1" for its copies, httpx for HTTP."""
    direct, copies = CLIENT_NAMES[protocol]
    return (direct if method == "direct" else copies).format(version)


def _effect(change: PlantedChange, night: date) -> float:
    if not change.covers(night):
        return 1.0
    if change.ramp_nights <= 0:
        return change.rate_factor
    done = min(1.0, ((night - change.start).days + 1) / change.ramp_nights)
    return 1 + (change.rate_factor - 1) * done


def plan_changes(
    rng: random.Random,
    models: Sequence[EndpointModel],
    points: Sequence[VantagePoint],
    *,
    first: date,
    last: date,
    plant: bool,
) -> Plan:
    """The plan: every endpoint's server version; the generator's own regressions and
    outages as truth; and, if `plant` and the history is long enough, the scenarios."""
    plan = Plan(versions=_versions(rng, models))
    plan.changes.extend(_generated(models, last))
    if plant and (last - first).days + 1 >= PLANT_MIN_NIGHTS:
        _plant_endpoints(plan, rng, models, first=first, last=last)
        _plant_groups(plan, rng, models, points, first=first, last=last)
    _index(plan, models, points)
    return plan


def _versions(rng: random.Random, models: Sequence[EndpointModel]) -> dict[int, str]:
    patch_by_site: dict[int, int] = {}
    versions = {}
    for model in models:
        site = model.site.site
        patch = patch_by_site.setdefault(site.pk, rng.randint(1, 20))
        versions[model.endpoint.pk] = f"{STORAGE_VERSIONS[site.storage_system]}.{patch}"
    return versions


def _generated(models: Sequence[EndpointModel], last: date) -> list[PlantedChange]:
    """The generator's own random regressions (a slower site, hidden where the TCP window
    bounds a stream; some recover) and site outages."""
    changes = []
    outages: set[tuple[str, date, date]] = set()
    for model in models:
        if model.regression:
            start, end, rate, server = model.regression
            ends = end if end <= last else None
            change = _about(model, "random-regression", start, ends, rate, server_factor=server)
            changes.append(change)
        if model.outage:
            outages.add((model.site.site.name, *model.outage))
    for site, start, end in sorted(outages):
        changes.append(PlantedChange("site-outage", start, end, site=site, error_class="refused"))
    return changes


def _about(
    model: EndpointModel, kind: str, start: date, end: date | None, rate: float, **extra: Any
) -> PlantedChange:
    return PlantedChange(
        kind,
        start,
        end,
        rate_factor=rate,
        endpoint=model.endpoint.name,
        site=model.site.site.name,
        protocol=model.endpoint.protocol,
        **extra,
    )


def _plant_endpoints(
    plan: Plan, rng: random.Random, models: Sequence[EndpointModel], *, first: date, last: date
) -> None:
    free = [m for m in models if m.regression is None]
    rng.shuffle(free)
    earliest = max(30, (last - first).days * 3 // 10)
    for i, model in enumerate(free[: round(len(free) * PLANTED_SHARE)]):
        start = first + timedelta(days=rng.randint(earliest, (last - first).days - 12))
        plan.changes.append(_scenario(plan, model, SCENARIOS[i % len(SCENARIOS)], start))


def _scenario(
    plan: Plan, model: EndpointModel, scenario: tuple[str, float, int], start: date
) -> PlantedChange:
    kind, factor, nights = scenario
    if kind == "drift":
        return _about(model, kind, start, None, factor, ramp_nights=nights)
    if kind in ("bad-night", "recovery"):
        return _about(model, kind, start, start + timedelta(days=nights), factor)
    if kind == "version-change":
        if sum(c.kind == kind for c in plan.changes) % 2:
            before = CLIENT_VERSIONS[model.endpoint.protocol]
            versions = {"client_version": (before, _next_patch(before))}
        else:
            before = plan.versions[model.endpoint.pk]
            versions = {"server_version": (before, _next_patch(before))}
        return _about(model, kind, start, None, factor, **versions)
    return _about(model, kind, start, None, factor)


def _next_patch(version: str) -> str:
    major_minor, patch = version.rsplit(".", 1)
    return f"{major_minor}.{int(patch) + 1}"


def _plant_groups(
    plan: Plan,
    rng: random.Random,
    models: Sequence[EndpointModel],
    points: Sequence[VantagePoint],
    *,
    first: date,
    last: date,
) -> None:
    """A vantage point's outage, a protocol's credential expiry and a site's downtime (with
    its Downtime row), each for a night or two in the second half of the history."""

    def night() -> date:
        return first + timedelta(days=rng.randint((last - first).days // 2, (last - first).days))

    point = rng.choice(points)
    start = night()
    plan.changes.append(
        PlantedChange(
            "vantage-point-outage",
            start,
            start + timedelta(days=1),
            vantage_point=point.name,
            error_class=ErrorClass.TIMEOUT.value,
        )
    )
    start = night()
    plan.changes.append(
        PlantedChange(
            "credential-expiry",
            start,
            start + timedelta(days=2),
            protocol=CREDENTIAL_PROTOCOL,
            error_class=ErrorClass.AUTH.value,
        )
    )
    plan.changes.append(_downtime(rng.choice(models), night()))


def _downtime(model: EndpointModel, start: date) -> PlantedChange:
    end = start + timedelta(days=2)
    site = model.site.site
    Downtime.objects.create(
        site=site,
        start=datetime.combine(start, time(0, 0), tzinfo=UTC),
        end=datetime.combine(end, time(0, 0), tzinfo=UTC),
        severity=Downtime.Severity.OUTAGE,
        scheduled=True,
        description="synthetic history: planted downtime (storage upgrade)",
    )
    return PlantedChange(
        "downtime", start, end, site=site.name, error_class=ErrorClass.REFUSED.value
    )


def _index(plan: Plan, models: Sequence[EndpointModel], points: Sequence[VantagePoint]) -> None:
    """Lookups by endpoint (rate, versions) and for failures (endpoints and vantage point)."""
    by_name = {m.endpoint.name: m for m in models}
    point_pk = {p.name: p.pk for p in points}
    for change in plan.changes:
        if change.endpoint and change.error_class is None:
            plan._by_endpoint.setdefault(by_name[change.endpoint].endpoint.pk, []).append(change)
        elif change.error_class and change.kind != "site-outage":
            endpoints = frozenset(m.endpoint.pk for m in models if _covered(change, m))
            vantage_point = point_pk[change.vantage_point] if change.vantage_point else None
            error_class = ErrorClass(change.error_class)
            plan._failures.append((change, endpoints, vantage_point, error_class))


def _covered(change: PlantedChange, model: EndpointModel) -> bool:
    """Whether a group change covers the endpoint (the vantage point is checked per run)."""
    if change.protocol and model.endpoint.protocol != change.protocol:
        return False
    return not (change.site and model.site.site.name != change.site)
