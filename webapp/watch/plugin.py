"""The watch's verdict on one site, endpoint or vantage point as a monitoring plugin judges
it (`manage.py check_watch`, docs/monitoring-probes.md): the live regressions about it by
state and severity, and this month's availability against optional thresholds.

CRITICAL: an open or acknowledged regression of severity critical. WARNING: one of severity
warning, a suspicious (pending) one, or a recovering one. OK: none. UNKNOWN: no such target,
or the watch never rolled up a night of it. Silenced regressions, the tester's own faults and
info-severity ones are counted in the perfdata but change no state. A vantage point answers
for what is blamed on it and for the tester faults of its series (its own trouble: they count
by severity), not for the sites' regressions its series see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from django.conf import settings
from django.db.models import Q, QuerySet

from webapp.sites.models import Endpoint, Site, VantagePoint
from webapp.watch.availability import availability_months
from webapp.watch.models import Regression, SeriesNight
from workers.engine.plugin import Perf, State, Thresholds, status_line

SERVICE = "FEDPROBE_WATCH"
Reg = Regression.State
Severity = Regression.Severity

# The states a regression is checked in; resolved and no-data ones say nothing now.
CHECKED = (Reg.PENDING, Reg.OPEN, Reg.ACKNOWLEDGED, Reg.RECOVERING, Reg.TESTER_FAULT)
# Perfdata labels: confirmed regressions by severity, then the ones that change no state.
COUNTS = ("critical", "warning", "suspicious", "recovering", "info", "silenced", "tester_faults")


@dataclass(frozen=True)
class Target:
    """What is checked: exactly one of a site, an endpoint or a vantage point."""

    site: Site | None = None
    endpoint: Endpoint | None = None
    vantage_point: VantagePoint | None = None

    def __str__(self) -> str:
        if self.site is not None:
            return f"site {self.site.name}"
        if self.endpoint is not None:
            return f"endpoint {self.endpoint.pk} ({self.endpoint.name})"
        assert self.vantage_point is not None
        return f"vantage point {self.vantage_point.name}"


@dataclass
class WatchVerdict:
    state: State
    line: str
    counts: dict[str, int] = field(default_factory=dict)


def target_find(*, site: str | None, endpoint: str | None, vantage_point: str | None) -> Target:
    """The named target; LookupError saying what was not found."""
    if site is not None:
        found_site = Site.objects.filter(name=site).first()
        if found_site is None:
            raise LookupError(f"--site: no site named {site!r}")
        return Target(site=found_site)
    if endpoint is not None:
        # isdigit() alone takes "²", which int() refuses: ASCII digits only.
        digits = endpoint.isascii() and endpoint.isdigit()
        found = Endpoint.objects.filter(pk=int(endpoint)).first() if digits else None
        if found is None:
            raise LookupError(f"--endpoint: no endpoint with id {endpoint!r}")
        return Target(endpoint=found)
    point = VantagePoint.objects.filter(name=vantage_point).first()
    if point is None:
        raise LookupError(f"--vantage-point: no vantage point named {vantage_point!r}")
    return Target(vantage_point=point)


def target_regressions(target: Target) -> QuerySet[Regression]:
    """The live regressions about the target, groups rather than their members: a site's own
    and its endpoints'; an endpoint's own and the site groups its series are members of; the
    ones blamed on a vantage point."""
    if target.site is not None:
        about = (Q(site=target.site) | Q(endpoint__site=target.site)) & Q(parent=None)
    elif target.endpoint is not None:
        grouped = Regression.objects.filter(endpoint=target.endpoint).values("parent")
        about = Q(endpoint=target.endpoint, parent=None) | Q(
            pk__in=grouped, blame__target=Regression.Blame.SITE
        )
    else:
        # Its series' regressions are the sites' trouble, except the tester's own faults.
        ours = Q(blame__target=Regression.Blame.VANTAGE_POINT) | Q(state=Reg.TESTER_FAULT)
        about = Q(vantage_point=target.vantage_point, parent=None) & ours
    return Regression.objects.filter(about, state__in=CHECKED).select_related("endpoint", "site")


def _measured(target: Target) -> bool:
    """Whether the watch rolled up any night of the target's series."""
    if target.site is not None:
        return SeriesNight.objects.filter(endpoint__site=target.site).exists()
    if target.endpoint is not None:
        return SeriesNight.objects.filter(endpoint=target.endpoint).exists()
    return SeriesNight.objects.filter(vantage_point=target.vantage_point).exists()


def _availability_pct(target: Target, now: datetime) -> float | None:
    """This month's (UTC) availability in %, as the site page shows it; None without runs
    (and for a vantage point, which has no availability of its own)."""
    month = [date(now.year, now.month, 1)]
    if target.site is not None:
        terms = availability_months(sites=[target.site], months=month)[0].terms
    elif target.endpoint is not None:
        found = availability_months(
            sites=[target.endpoint.site], months=month, endpoint=target.endpoint
        )
        terms = found[0].endpoints[0].terms
    else:
        return None
    return None if terms.availability is None else round(100 * terms.availability, 3)


def _weight(regression: Regression, target: Target, now: datetime) -> tuple[State, str]:
    """What one regression does to the state, and the count it goes to."""
    if regression.silenced_until is not None and regression.silenced_until > now:
        return State.OK, "silenced"
    if regression.state == Reg.TESTER_FAULT and target.vantage_point is None:
        return State.OK, "tester_faults"
    if regression.state == Reg.PENDING:
        return State.WARNING, "suspicious"
    if regression.state == Reg.RECOVERING:
        return State.WARNING, "recovering"
    if regression.severity == Severity.CRITICAL:
        return State.CRITICAL, "critical"
    if regression.severity == Severity.WARNING:
        return State.WARNING, "warning"
    return State.OK, "info"


def regression_link(regression: Regression) -> str:
    return f"{settings.FEDPROBE_BASE_URL}/regressions/{regression.pk}/"


def watch_verdict(*, target: Target, thresholds: Thresholds, now: datetime) -> WatchVerdict:
    """The plugin's verdict on the target: state, status line (the worst regression in one
    sentence with its link) and perfdata."""
    counts = dict.fromkeys(COUNTS, 0)
    ranked: list[tuple[State, Regression]] = []
    for regression in target_regressions(target):
        state, counted = _weight(regression, target, now)
        counts[counted] += 1
        ranked.append((state, regression))
    # A vantage point that never ran anything has no night, but its not-run regression counts.
    if not ranked and not _measured(target):
        why = f"{target}: no data (the watch has rolled up no night of it)"
        return WatchVerdict(State.UNKNOWN, status_line(SERVICE, State.UNKNOWN, why))
    # Worst first: by state, then the newest.
    ranked.sort(key=lambda pair: (pair[0], pair[1].opened_at), reverse=True)
    availability = _availability_pct(target, now)
    states = [ranked[0][0]] if ranked else []
    words = [str(target)]
    if availability is not None:
        states.append(thresholds.state(availability))
        tripped = thresholds.tripped(availability)
        shown = f"availability {availability:g}% this month"
        words.append(f"{shown} is {tripped.describe()}" if tripped else shown)
    state = max(states, default=State.OK)
    words.append(_counts_text(counts))
    if ranked and ranked[0][0] is not State.OK:
        words.append(f"worst: {_sentence(ranked[0][1])}")
    perf = [Perf(name, value, minimum=0.0) for name, value in counts.items()]
    if availability is not None:
        perf.append(Perf("availability", availability, "%", thresholds, 0.0, 100.0))
    return WatchVerdict(state, status_line(SERVICE, state, "; ".join(words), perf), counts)


def _counts_text(counts: dict[str, int]) -> str:
    named = [f"{n} {name.replace('_', ' ')}" for name, n in counts.items() if n]
    return "live regressions: " + (", ".join(named) if named else "none")


def _sentence(regression: Regression) -> str:
    """One sentence an operator can act on, with the link to the regression's page."""
    since = regression.opened_at.date().isoformat()
    return (
        f"{regression.summary} ({regression.severity}, {regression.state} since {since}) "
        f"{regression_link(regression)}"
    )
