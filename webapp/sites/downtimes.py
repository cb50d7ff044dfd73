"""Downtimes of sites and endpoints (GOCDB's shape): the services that declare, change and
delete them, and the reads the pages, the API, availability and the watch share
(docs/watch.md "Downtimes")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User as Account
from django.db.models import Q, QuerySet
from django.utils import timezone

from webapp.accounts.roles import User, is_admin
from webapp.sites.models import Downtime, Endpoint, Site


class DowntimeRefused(ValueError):
    """The downtime asked for is malformed or not the user's to declare; `field` names why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class DowntimeNotAllowed(PermissionError):
    """The user may not declare or change downtimes of that site (nor of its endpoints)."""


@dataclass(frozen=True)
class DowntimeFields:
    """What a downtime says: where (a site or one endpoint, never both), when and how bad."""

    site: Site | None
    endpoint: Endpoint | None
    start: datetime
    end: datetime
    severity: str
    scheduled: bool
    description: str = ""

    def check(self, user: User | None) -> None:
        """Raise DowntimeRefused naming the field at fault."""
        if (self.site is None) == (self.endpoint is None):
            raise DowntimeRefused("site", "give a site or an endpoint (one of them, not both)")
        if self.end <= self.start:
            raise DowntimeRefused("end", "the downtime must end after it starts")
        if self.severity not in Downtime.Severity.values:
            raise DowntimeRefused("severity", f"one of {', '.join(Downtime.Severity.values)}")
        if not self.covered_site.editable_by(user):
            raise DowntimeNotAllowed(
                f"site {self.covered_site.name}: only its owner or an admin declares its downtimes"
            )

    @property
    def covered_site(self) -> Site:
        if self.site is not None:
            return self.site
        assert self.endpoint is not None
        return self.endpoint.site


def downtime_create(*, fields: DowntimeFields, created_by: User | None) -> Downtime:
    """Declare a downtime; DowntimeRefused (nothing stored) when malformed, DowntimeNotAllowed
    when its site is not the user's to edit."""
    fields.check(created_by)
    return Downtime.objects.create(
        site=fields.site,
        endpoint=fields.endpoint,
        start=fields.start,
        end=fields.end,
        severity=fields.severity,
        scheduled=fields.scheduled,
        description=fields.description,
        created_by=created_by if isinstance(created_by, Account) else None,
    )


def downtime_update(*, downtime: Downtime, changes: dict[str, Any], user: User | None) -> Downtime:
    """Change some of a downtime's fields (as DowntimeFields names them), checked as a whole:
    the user must be allowed both the downtime as it was and as it becomes."""
    if not downtime_editable_by(downtime, user):
        raise DowntimeNotAllowed("only its site's owner or an admin changes its downtimes")
    now = downtime_fields(downtime)
    merged = {
        name: changes.get(name, getattr(now, name)) for name in DowntimeFields.__annotations__
    }
    if "site" in changes and changes["site"] is not None and "endpoint" not in changes:
        merged["endpoint"] = None
    if "endpoint" in changes and changes["endpoint"] is not None and "site" not in changes:
        merged["site"] = None
    fields = DowntimeFields(**merged)
    fields.check(user)
    for name, value in merged.items():
        setattr(downtime, name, value)
    downtime.save()
    return downtime


def downtime_delete(*, downtime: Downtime, user: User | None) -> None:
    """Delete a downtime (ending one early is a PATCH of its end)."""
    if not downtime_editable_by(downtime, user):
        raise DowntimeNotAllowed("only its site's owner or an admin deletes its downtimes")
    downtime.delete()


def downtime_fields(downtime: Downtime) -> DowntimeFields:
    return DowntimeFields(
        site=downtime.site,
        endpoint=downtime.endpoint,
        start=downtime.start,
        end=downtime.end,
        severity=downtime.severity,
        scheduled=downtime.scheduled,
        description=downtime.description,
    )


def downtime_editable_by(downtime: Downtime, user: User | None) -> bool:
    """Whoever may edit the site it covers (or its endpoint's site); admins always."""
    if is_admin(user):
        return True
    site = downtime.site if downtime.site_id else downtime.endpoint.site  # type: ignore[union-attr]
    assert site is not None
    return site.editable_by(user)


# -- reads ------------------------------------------------------------------------------------


def downtime_list(
    *,
    site: Site | None = None,
    endpoint: Endpoint | None = None,
    active: bool | None = None,
    now: datetime | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[Downtime]:
    """Downtimes, newest start first. `site`: the site's own and its endpoints'; `endpoint`:
    its own and its site's; `active`: those covering `now` (True) or not (False);
    `since`/`until`: those overlapping the window (ending after `since`, starting before
    `until`)."""
    downtimes = Downtime.objects.select_related("site", "endpoint__site", "created_by")
    if site is not None:
        downtimes = downtimes.filter(Q(site=site) | Q(endpoint__site=site))
    if endpoint is not None:
        downtimes = downtimes.filter(Q(endpoint=endpoint) | Q(site_id=endpoint.site_id))
    if active is not None:
        covering = Q(start__lte=now or timezone.now(), end__gt=now or timezone.now())
        downtimes = downtimes.filter(covering) if active else downtimes.exclude(covering)
    if since is not None:
        downtimes = downtimes.filter(end__gt=since)
    if until is not None:
        downtimes = downtimes.filter(start__lt=until)
    return downtimes.order_by("-start", "-id")


def downtimes_current_and_upcoming(
    *, now: datetime, site: Site | None = None, endpoint: Endpoint | None = None
) -> list[Downtime]:
    """What a site or endpoint page lists: the downtimes not over yet, soonest first."""
    return list(downtime_list(site=site, endpoint=endpoint, since=now).order_by("start", "id"))


def downtimes_covering(
    *, endpoint_ids: Iterable[int], start: datetime, end: datetime
) -> dict[int, list[Downtime]]:
    """Per endpoint id, the downtimes overlapping [start, end) that cover it: its own and its
    site's (the watch and availability read this). Two queries."""
    ids = list(endpoint_ids)
    sites = dict(Endpoint.objects.filter(pk__in=ids).values_list("pk", "site_id"))
    endpoints_of_site: defaultdict[int, list[int]] = defaultdict(list)
    for endpoint_id, site_id in sites.items():
        endpoints_of_site[site_id].append(endpoint_id)
    rows = Downtime.objects.filter(
        Q(endpoint_id__in=ids) | Q(site_id__in=set(sites.values())), start__lt=end, end__gt=start
    ).order_by("start", "id")
    covering: dict[int, list[Downtime]] = {endpoint_id: [] for endpoint_id in ids}
    for downtime in rows:
        if downtime.endpoint_id is not None:
            covering[downtime.endpoint_id].append(downtime)
        else:
            for endpoint_id in endpoints_of_site[downtime.site_id or 0]:
                covering[endpoint_id].append(downtime)
    return covering
