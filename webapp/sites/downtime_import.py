"""Downtimes from GOCDB (`manage.py downtimes import gocdb`, and the refresh beat runs when
FEDPROBE_GOCDB_DOWNTIME_URL is set; docs/topology.md "Downtimes").

A GOCDB downtime covers services; here it covers the endpoints of those services: the ones
imported from that service (get_downtime_nested_services names it), and any endpoint whose
URL's host is the service's HOSTNAME and whose protocol is one of its SERVICE_TYPE's. It is
one row per endpoint, found again by GOCDB's PRIMARY_KEY: a re-import updates its times,
severity and description. The feed is taken as complete (all ongoing and future downtimes):
a downtime imported earlier that is no longer in it and has not ended was shortened or
cancelled in GOCDB, so it ends now (or, not yet begun, is removed) and stops covering.
Downtimes declared here (source blank) are never changed."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction

from webapp.sites.models import Downtime, Endpoint, Source
from webapp.sites.registry_formats import (
    GOCDB_SERVICE_TYPES,
    DowntimeRecord,
    DowntimeService,
    gocdb_downtimes,
)
from webapp.sites.topology import ImportPlan, gocdb_pages

_FIELDS = ("start", "end", "severity", "scheduled", "description")
# Parameters of get_downtime that already say which window the feed covers.
_WINDOW_PARAMETERS = {"windowstart", "startdate", "ongoing_only"}


class DowntimePlan(ImportPlan):
    """An ImportPlan whose rows are downtimes; some are removed (cancelled in GOCDB)."""

    def __init__(self) -> None:
        super().__init__(source=Source.GOCDB)
        self.new_downtimes: list[Downtime] = []
        self.removed: list[Downtime] = []

    @property
    def changes_anything(self) -> bool:
        return bool(self.new_downtimes or self.changed or self.removed)


def downtimes_read(
    *, locations: list[str], client_cert: str = "", client_key: str = ""
) -> dict[str, DowntimeRecord]:
    """The downtimes of GOCDB answers (files or URLs), by PRIMARY_KEY."""
    return gocdb_downtimes(gocdb_pages(locations, client_cert=client_cert, client_key=client_key))


def downtimes_plan(*, downtimes: dict[str, DowntimeRecord], now: datetime) -> DowntimePlan:
    """What importing `downtimes` would change at `now` (nothing is written)."""
    plan = DowntimePlan()
    existing = {
        (d.external_id, d.endpoint_id): d
        for d in Downtime.objects.filter(source=Source.GOCDB).select_related("endpoint")
    }
    covers = _Covers()
    uncovered = 0
    wanted: set[tuple[str, int | None]] = set()
    for key, record in sorted(downtimes.items()):
        endpoints = covers.endpoints(record.services)
        uncovered += not endpoints
        for endpoint in endpoints:
            wanted.add((key, endpoint.pk))
            _plan_one(plan, record, endpoint, existing.get((key, endpoint.pk)))
    for (key, endpoint_id), downtime in sorted(existing.items(), key=lambda item: item[1].pk):
        if (key, endpoint_id) not in wanted and downtime.end > now:
            _plan_vanished(plan, downtime, now)
    if uncovered:
        plan.say("skip", f"{uncovered} downtimes of services that are no endpoint here")
    return plan


@transaction.atomic
def downtimes_apply(plan: DowntimePlan) -> None:
    """Write what `plan` says, all or nothing."""
    for downtime in plan.new_downtimes:
        downtime.save()
    for changed in plan.changed:
        changed.save()
    for removed in plan.removed:
        removed.delete()


def downtimes_refresh(*, now: datetime) -> DowntimePlan | None:
    """Import FEDPROBE_GOCDB_DOWNTIME_URL's ongoing and future downtimes (None: not set)."""
    url = settings.FEDPROBE_GOCDB_DOWNTIME_URL
    if not url:
        return None
    downtimes = downtimes_read(
        locations=[refresh_url(url, now)],
        client_cert=settings.FEDPROBE_REGISTRY_CERT,
        client_key=settings.FEDPROBE_REGISTRY_KEY,
    )
    plan = downtimes_plan(downtimes=downtimes, now=now)
    downtimes_apply(plan)
    return plan


def refresh_url(url: str, now: datetime) -> str:
    """`url` asking for the downtimes that have not ended by today (windowstart=today),
    unless it already says which."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(name in _WINDOW_PARAMETERS for name, _ in query):
        return url
    query.append(("windowstart", f"{now:%Y-%m-%d}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


class _Covers:
    """Which endpoints a GOCDB service is: read once per plan."""

    def __init__(self) -> None:
        self.by_service: dict[str, list[Endpoint]] = defaultdict(list)
        self.by_host: dict[str, list[Endpoint]] = defaultdict(list)
        for endpoint in Endpoint.objects.select_related("site"):
            if endpoint.source == Source.GOCDB:
                self.by_service[endpoint.external_id.split("/")[0]].append(endpoint)
            host = (urlsplit(endpoint.base_url).hostname or "").lower()
            self.by_host[host].append(endpoint)

    def endpoints(self, services: list[DowntimeService]) -> list[Endpoint]:
        found: dict[int, Endpoint] = {}
        for service in services:
            schemes = GOCDB_SERVICE_TYPES.get(service.service_type.lower(), ())
            matches = [e for e in self.by_host[service.hostname] if e.protocol in schemes]
            if service.primary_key:
                matches += self.by_service[service.primary_key]
            found.update((e.pk, e) for e in matches)
        return [found[pk] for pk in sorted(found)]


def _plan_one(
    plan: DowntimePlan, record: DowntimeRecord, endpoint: Endpoint, downtime: Downtime | None
) -> None:
    wanted = Downtime(
        endpoint=endpoint,
        start=record.start,
        end=record.end,
        severity=record.severity,
        scheduled=record.scheduled,
        description=record.description,
        source=Source.GOCDB,
        external_id=record.primary_key,
    )
    what = f"downtime {record.primary_key} of endpoint {endpoint.name}"
    if downtime is None:
        plan.new_downtimes.append(wanted)
        plan.say("create", f"{what}: {_window(wanted)}")
        return
    said = []
    for name in _FIELDS:
        if getattr(downtime, name) != getattr(wanted, name):
            said.append(name)
            setattr(downtime, name, getattr(wanted, name))
    if not said:
        plan.say("unchanged", what)
        return
    plan.changed.append(downtime)
    plan.say("update", f"{what}: {', '.join(said)} now {_window(downtime)}")


def _plan_vanished(plan: DowntimePlan, downtime: Downtime, now: datetime) -> None:
    what = f"downtime {downtime.external_id} of endpoint {downtime.endpoint}"
    if downtime.start >= now:
        plan.removed.append(downtime)
        plan.say("remove", f"{what}: no longer in GOCDB (cancelled before it began)")
        return
    downtime.end = now
    plan.changed.append(downtime)
    plan.say("end", f"{what}: no longer in GOCDB, ends now ({now:%Y-%m-%d %H:%M} UTC)")


def _window(downtime: Downtime) -> str:
    kind = "scheduled" if downtime.scheduled else "unscheduled"
    return (
        f"{downtime.severity}, {kind}, {downtime.start:%Y-%m-%d %H:%M}"
        f" - {downtime.end:%Y-%m-%d %H:%M} UTC"
    )
