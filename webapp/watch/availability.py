"""Availability and reliability per site, endpoint and month, as the WLCG A/R reports
compute them (docs/watch.md "Availability and reliability").

A run is a test result. Each ended run (cancelled ones left out) of the month (by its
creation time, UTC) counts as exactly one of:

- unknown: a tester fault (Run.is_tester_fault): it says nothing of the endpoint;
- scheduled downtime / unscheduled downtime: created while an outage downtime covered the
  endpoint (its own or its site's), whatever its outcome; a warning downtime changes nothing;
- up: succeeded (1) or partial (half up, half down, as the site page counts it);
- down: failed or timed out (and the other half of a partial run).

availability = up / (total - unknown)
reliability  = up / (total - scheduled downtime - unknown)
(None when the denominator is 0: nothing to judge.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from django.db.models import Case, Count, Exists, OuterRef, Q, Value, When

from webapp.campaigns.models import Run, q_tester_fault
from webapp.sites.models import Downtime, Endpoint, Site

FORMULA = {
    "availability": "up / (total - unknown)",
    "reliability": "up / (total - scheduled_downtime - unknown)",
}
RULE = (
    "A run is a test result; cancelled runs are left out. Tester faults are unknown. Runs "
    "created during an outage downtime of the endpoint or its site count as scheduled or "
    "unscheduled downtime, whatever their outcome. Otherwise a succeeded run is up, a partial "
    "run half up and half down, a failed or timed-out run down."
)


class BadMonth(ValueError):
    """A month that is not YYYY-MM (field `month`)."""


def month_parse(text: str) -> date:
    """The first day of the month `text` ("YYYY-MM"); BadMonth otherwise."""
    try:
        year, month = text.split("-")
        if len(year) != 4 or len(month) != 2:
            raise ValueError
        return date(int(year), int(month), 1)
    except ValueError:
        raise BadMonth(f"{text!r} is not a month: use YYYY-MM (2026-11)") from None


def month_next(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def months_back(month: date, count: int) -> list[date]:
    """`month` and the `count - 1` before it, oldest first."""
    months = [month]
    for _ in range(count - 1):
        first = months[0]
        months.insert(0, date(first.year - (first.month == 1), (first.month - 2) % 12 + 1, 1))
    return months


@dataclass
class Terms:
    """The formula's terms for one endpoint (or site) and month, in runs."""

    total: float = 0
    up: float = 0
    down: float = 0
    unknown: float = 0
    scheduled_downtime: float = 0
    unscheduled_downtime: float = 0

    def add(self, other: Terms) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    @property
    def availability(self) -> float | None:
        judged = self.total - self.unknown
        return self.up / judged if judged > 0 else None

    @property
    def reliability(self) -> float | None:
        judged = self.total - self.scheduled_downtime - self.unknown
        return self.up / judged if judged > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "availability": _round(self.availability),
            "reliability": _round(self.reliability),
        }


@dataclass
class EndpointMonth:
    endpoint: int
    name: str
    protocol: str
    terms: Terms = field(default_factory=Terms)


@dataclass
class SiteMonth:
    """A site's month: its terms (every endpoint pooled) and each endpoint's."""

    site: int
    name: str
    month: date
    terms: Terms
    endpoints: list[EndpointMonth]

    def to_json(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "name": self.name,
            "month": self.month.strftime("%Y-%m"),
            **self.terms.to_json(),
            "endpoints": [
                {
                    "endpoint": e.endpoint,
                    "name": e.name,
                    "protocol": e.protocol,
                    **e.terms.to_json(),
                }
                for e in self.endpoints
            ],
        }


def availability_months(
    *, sites: Iterable[Site], months: list[date], endpoint: Endpoint | None = None
) -> list[SiteMonth]:
    """Per site (and per endpoint of it, or only `endpoint`) and month, the A/R terms.
    One query for the endpoints and one per month for the runs, whatever the history."""
    site_list = list(sites)
    endpoints = Endpoint.objects.filter(site__in=site_list).order_by("protocol", "name")
    if endpoint is not None:
        endpoints = endpoints.filter(pk=endpoint.pk)
    by_site: defaultdict[int, list[Endpoint]] = defaultdict(list)
    for one in endpoints:
        by_site[one.site_id].append(one)
    answer = []
    for month in months:
        terms = _terms_per_endpoint([e.pk for rows in by_site.values() for e in rows], month)
        for site in site_list:
            per_endpoint = [
                EndpointMonth(e.pk, e.name, e.protocol, terms.get(e.pk, Terms()))
                for e in by_site[site.pk]
            ]
            pooled = Terms()
            for counted in per_endpoint:
                pooled.add(counted.terms)
            answer.append(SiteMonth(site.pk, site.name, month, pooled, per_endpoint))
    return answer


# The site page shows this month and the ones before it.
SITE_PAGE_MONTHS = 4


@dataclass(frozen=True)
class AvailabilityRow:
    """One line of the site page's table: the site or one endpoint, its terms per month."""

    name: str
    endpoint: int | None
    months: list[Terms]


@dataclass(frozen=True)
class AvailabilityTable:
    months: list[str]  # "YYYY-MM", oldest first
    rows: list[AvailabilityRow]  # the site first, then its endpoints
    formula: dict[str, str]
    rule: str


def site_availability(*, site: Site, now: datetime) -> AvailabilityTable:
    """The site page's table: this month (UTC) and the 3 before, for the site and each of its
    endpoints."""
    months = months_back(date(now.year, now.month, 1), SITE_PAGE_MONTHS)
    found = availability_months(sites=[site], months=months)
    rows = [AvailabilityRow(f"site {site.name}", None, [m.terms for m in found])]
    for index, endpoint in enumerate(found[0].endpoints if found else []):
        terms = [m.endpoints[index].terms for m in found]
        rows.append(AvailabilityRow(endpoint.name, endpoint.endpoint, terms))
    return AvailabilityTable([m.strftime("%Y-%m") for m in months], rows, FORMULA, RULE)


def _terms_per_endpoint(endpoint_ids: list[int], month: date) -> dict[int, Terms]:
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    end_day = month_next(month)
    end = datetime(end_day.year, end_day.month, 1, tzinfo=UTC)
    rows = (
        Run.objects.filter(
            endpoint_id__in=endpoint_ids,
            created_at__gte=start,
            created_at__lt=end,
            status__in=Run.Status.ENDED,
        )
        .annotate(
            unknown=Case(When(q_tester_fault(), then=Value(True)), default=Value(False)),
            scheduled_out=Exists(_outage(scheduled=True)),
            unscheduled_out=Exists(_outage(scheduled=False)),
        )
        .values("endpoint_id", "status", "unknown", "scheduled_out", "unscheduled_out")
        .annotate(n=Count("pk"))
        .order_by()
    )
    terms: defaultdict[int, Terms] = defaultdict(Terms)
    for row in rows:
        _count(terms[row["endpoint_id"]], row)
    return dict(terms)


def _outage(*, scheduled: bool) -> Any:
    """The outage downtimes (of the outer run's endpoint or its site) covering its start."""
    return Downtime.objects.filter(
        Q(endpoint_id=OuterRef("endpoint_id")) | Q(site_id=OuterRef("endpoint__site_id")),
        severity=Downtime.Severity.OUTAGE,
        scheduled=scheduled,
        start__lte=OuterRef("created_at"),
        end__gt=OuterRef("created_at"),
    )


def _count(terms: Terms, row: Mapping[str, Any]) -> None:
    """One group of runs into its term (the module's rule, in its order)."""
    n = row["n"]
    terms.total += n
    if row["unknown"]:
        terms.unknown += n
    elif row["scheduled_out"]:
        terms.scheduled_downtime += n
    elif row["unscheduled_out"]:
        terms.unscheduled_downtime += n
    elif row["status"] == Run.Status.SUCCEEDED:
        terms.up += n
    elif row["status"] == Run.Status.PARTIAL:
        terms.up += n / 2
        terms.down += n / 2
    else:
        terms.down += n


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
