"""Whose fault it is: when many series go bad in one night for one reason, one regression on
that reason, with the series' regressions as its members (docs/watch.md#whose-fault-it-is).

The rules, applied in this order to a night's availability verdicts (a series is claimed by
the first rule that groups it; N = FEDPROBE_WATCH_BLAME_MIN_SITES, S =
FEDPROBE_WATCH_BLAME_MIN_SHARE):
- vantage point: bad against >= N sites and >= S of the sites it measured, while the other
  vantage points see fewer than S of those sites bad;
- credential: endpoints presenting credentials of one kind and issuer bad at >= N sites and
  >= S of those endpoints measured;
- protocol: endpoints of one protocol bad at >= N sites and >= S of that protocol's endpoints;
- site: bad from every vantage point that measured it, when at least
  FEDPROBE_WATCH_BLAME_SITE_MIN_VANTAGE_POINTS did.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.conf import settings

from webapp.sites.models import Endpoint, Site, VantagePoint
from webapp.watch.episodes import Finding, regression_advance
from webapp.watch.models import Regression

Blame = Regression.Blame
GROUP_PREFIXES = ("vp:", "credential:", "protocol:", "site:")


@dataclass(frozen=True)
class SeriesVerdict:
    """One series' availability on the evaluated night, as the blame rules read it."""

    series_key: str
    endpoint_id: int
    vantage_point_id: int
    bad: bool
    all_failed: bool
    in_downtime: bool = False  # its endpoint is in a downtime tonight: left out of the rules


@dataclass(frozen=True)
class Group:
    """A blamed thing and the series it explains."""

    key: str
    target: str
    subject: dict[str, Any]
    rule: str
    evidence: dict[str, int]
    members: list[SeriesVerdict]
    label: str


@dataclass(frozen=True)
class _Endpoint:
    site_id: int
    site_name: str
    protocol: str
    credential: str  # "kind issuer", "" for none


def groups_blame(
    *,
    night: date,
    verdicts: list[SeriesVerdict],
    live: dict[str, Regression],
    at: datetime,
) -> list[Group]:
    """Find tonight's groups, open or keep their regressions, attach the members, and let
    the groups not bad tonight recover. Returns the groups found. The series of endpoints in
    a downtime (outage or warning) are left out: during one nothing opens, so no group of
    theirs either, and a group is neither found nor recovered on them."""
    verdicts = [v for v in verdicts if not v.in_downtime]
    endpoints = _endpoints({v.endpoint_id for v in verdicts})
    groups = night_groups(verdicts, endpoints)
    for group in groups:
        parent = regression_advance(
            regression=live.get(group.key), finding=_finding(group, night), night=night, at=at
        )
        if parent is not None:
            live[group.key] = parent
            _attach(parent, group, live)
    _recover_quiet_groups(
        groups=groups, verdicts=verdicts, endpoints=endpoints, live=live, night=night, at=at
    )
    return groups


def night_groups(verdicts: list[SeriesVerdict], endpoints: dict[int, _Endpoint]) -> list[Group]:
    """The night's groups, rule by rule, each rule on the series no earlier rule claimed."""
    groups: list[Group] = []
    left = list(verdicts)
    for rule in (_vantage_point_groups, _credential_groups, _protocol_groups, _site_groups):
        found = rule(left, endpoints)
        claimed = {m.series_key for g in found for m in g.members}
        left = [v for v in left if v.series_key not in claimed]
        groups += found
    return groups


def _thresholds() -> tuple[int, float]:
    return settings.FEDPROBE_WATCH_BLAME_MIN_SITES, settings.FEDPROBE_WATCH_BLAME_MIN_SHARE


def _vantage_point_groups(
    verdicts: list[SeriesVerdict], endpoints: dict[int, _Endpoint]
) -> list[Group]:
    min_sites, min_share = _thresholds()
    bad_sites: dict[int, set[int]] = defaultdict(set)
    measured: dict[int, set[int]] = defaultdict(set)
    for v in verdicts:
        site = endpoints[v.endpoint_id].site_id
        measured[v.vantage_point_id].add(site)
        if v.bad:
            bad_sites[v.vantage_point_id].add(site)
    names = dict(VantagePoint.objects.filter(pk__in=bad_sites).values_list("id", "name"))
    groups = []
    for point, sites in bad_sites.items():
        if len(sites) < min_sites or len(sites) < min_share * len(measured[point]):
            continue
        others_bad = set().union(*(s for p, s in bad_sites.items() if p != point))
        others_measured = set().union(*(s for p, s in measured.items() if p != point))
        seen_by_others = sites & others_measured
        if seen_by_others and len(sites & others_bad) >= min_share * len(seen_by_others):
            continue  # the others see the same sites bad: not this vantage point's fault
        members = [v for v in verdicts if v.vantage_point_id == point and v.bad]
        groups.append(
            Group(
                key=f"vp:{names[point]}:availability",
                target=Blame.VANTAGE_POINT,
                subject={"vantage_point_id": point},
                rule=(
                    f"bad against >= {min_sites} sites and >= {min_share:.0%} of the sites it "
                    "measured, while other vantage points saw them good"
                ),
                evidence={"bad_sites": len(sites), "measured_sites": len(measured[point])},
                members=members,
                label=f"vantage point {names[point]}",
            )
        )
    return groups


def _by_endpoint_attribute(
    verdicts: list[SeriesVerdict],
    endpoints: dict[int, _Endpoint],
    attribute: Callable[[_Endpoint], str],
) -> list[tuple[str, set[int], set[int], set[int], list[SeriesVerdict]]]:
    """(value, bad endpoints, their sites, measured endpoints, bad verdicts) per value of
    `attribute` that meets the thresholds."""
    min_sites, min_share = _thresholds()
    measured: dict[str, set[int]] = defaultdict(set)
    bad: dict[str, list[SeriesVerdict]] = defaultdict(list)
    for v in verdicts:
        value = attribute(endpoints[v.endpoint_id])
        if not value:
            continue
        measured[value].add(v.endpoint_id)
        if v.bad:
            bad[value].append(v)
    found = []
    for value, members in bad.items():
        bad_endpoints = {v.endpoint_id for v in members}
        sites = {endpoints[e].site_id for e in bad_endpoints}
        if len(sites) >= min_sites and len(bad_endpoints) >= min_share * len(measured[value]):
            found.append((value, bad_endpoints, sites, measured[value], members))
    return found


def _credential_groups(
    verdicts: list[SeriesVerdict], endpoints: dict[int, _Endpoint]
) -> list[Group]:
    min_sites, min_share = _thresholds()
    return [
        Group(
            key=f"credential:{value}:availability",
            target=Blame.CREDENTIAL,
            subject={},
            rule=(
                f"endpoints presenting one credential kind and issuer bad at >= {min_sites} "
                f"sites and >= {min_share:.0%} of those measured"
            ),
            evidence=_evidence(bad, sites, measured),
            members=members,
            label=f"credential {value}",
        )
        for value, bad, sites, measured, members in _by_endpoint_attribute(
            verdicts, endpoints, lambda e: e.credential
        )
    ]


def _protocol_groups(verdicts: list[SeriesVerdict], endpoints: dict[int, _Endpoint]) -> list[Group]:
    min_sites, min_share = _thresholds()
    return [
        Group(
            key=f"protocol:{value}:availability",
            target=Blame.PROTOCOL,
            subject={"protocol": value},
            rule=(
                f"endpoints of one protocol bad at >= {min_sites} sites and >= {min_share:.0%} "
                "of that protocol's endpoints measured"
            ),
            evidence=_evidence(bad, sites, measured),
            members=members,
            label=f"protocol {value}",
        )
        for value, bad, sites, measured, members in _by_endpoint_attribute(
            verdicts, endpoints, lambda e: e.protocol
        )
    ]


def _evidence(bad: set[int], sites: set[int], measured: set[int]) -> dict[str, int]:
    return {"bad_endpoints": len(bad), "bad_sites": len(sites), "measured_endpoints": len(measured)}


def _site_groups(verdicts: list[SeriesVerdict], endpoints: dict[int, _Endpoint]) -> list[Group]:
    min_points = settings.FEDPROBE_WATCH_BLAME_SITE_MIN_VANTAGE_POINTS
    measuring: dict[int, set[int]] = defaultdict(set)
    bad_from: dict[int, set[int]] = defaultdict(set)
    for v in verdicts:
        site = endpoints[v.endpoint_id].site_id
        measuring[site].add(v.vantage_point_id)
        if v.bad:
            bad_from[site].add(v.vantage_point_id)
    groups = []
    for site, points in bad_from.items():
        if len(points) < min_points or points != measuring[site]:
            continue
        name = next(e.site_name for e in endpoints.values() if e.site_id == site)
        members = [v for v in verdicts if v.bad and endpoints[v.endpoint_id].site_id == site]
        groups.append(
            Group(
                key=f"site:{name}:availability",
                target=Blame.SITE,
                subject={"site_id": site},
                rule=(f"bad from every vantage point that measured it (at least {min_points})"),
                evidence={"bad_vantage_points": len(points), "measuring": len(points)},
                members=members,
                label=f"site {name}",
            )
        )
    return groups


def _endpoints(ids: Iterable[int]) -> dict[int, _Endpoint]:
    found = {}
    for endpoint in Endpoint.objects.filter(pk__in=set(ids)).select_related("site"):
        credential = ""
        if endpoint.credential_kind != "none" and endpoint.credential:
            issuer = endpoint.credential_info().get("issuer") or "unknown issuer"
            credential = f"{endpoint.credential_kind} {issuer}"
        found[endpoint.pk] = _Endpoint(
            endpoint.site_id, endpoint.site.name, endpoint.protocol, credential
        )
    return found


def _finding(group: Group, night: date) -> Finding:
    all_failed = all(m.all_failed for m in group.members)
    return Finding(
        key=group.key,
        metric="availability",
        bad=True,
        confirmed=True,
        tier=Regression.Tier.BREAKAGE,
        verdict=Regression.Verdict.REGRESSION,
        severity=Regression.Severity.CRITICAL if all_failed else Regression.Severity.WARNING,
        summary=f"{group.label}: {len(group.members)} series failed ({group.rule})",
        subject=group.subject,
        detector={
            "name": "blame",
            "parameters": dict(zip(("min_sites", "min_share"), _thresholds(), strict=True)),
            # The group is found among one night's availability verdicts.
            "baseline_window": None,
            "target_window": [night.isoformat(), night.isoformat()],
        },
        blame={"target": group.target, "rule": group.rule, **group.evidence},
    )


def _attach(parent: Regression, group: Group, live: dict[str, Regression]) -> None:
    """Make the group's series' live regressions members of `parent` (notified with it)."""
    member_keys = [m.series_key for m in group.members]
    member_keys += _error_keys(member_keys, live)
    blamed = {"target": group.target, "rule": group.rule, "group": group.key}
    Regression.objects.filter(key__in=member_keys, state__in=Regression.LIVE).exclude(
        parent=parent
    ).update(parent=parent, blame=blamed)
    for key in member_keys:
        if key in live:
            live[key].parent = parent
            live[key].blame = blamed


def _error_keys(availability_keys: list[str], live: dict[str, Regression]) -> list[str]:
    """The live error-class regressions of the series whose availability keys are given:
    members of the group with them."""
    series = {key.removesuffix("availability") for key in availability_keys}
    return [key for key in live if ":error:" in key and key[: key.index(":error:") + 1] in series]


def _recover_quiet_groups(
    *,
    groups: list[Group],
    verdicts: list[SeriesVerdict],
    endpoints: dict[int, _Endpoint],
    live: dict[str, Regression],
    night: date,
    at: datetime,
) -> None:
    """A live group regression not found tonight is a good night for it, if its subject was
    measured tonight at all."""
    found = {g.key for g in groups}
    measured = _measured_subjects(verdicts, endpoints)
    for key, regression in list(live.items()):
        if (
            not key.startswith(GROUP_PREFIXES)
            or key in found
            or key.endswith((":not-run", ":no-data"))
        ):
            continue
        if key.rsplit(":", 1)[0] not in measured:
            continue
        advanced = regression_advance(
            regression=regression, finding=Finding(key, "availability", False), night=night, at=at
        )
        if advanced is None or advanced.state == Regression.State.RESOLVED:
            live.pop(key)


def _measured_subjects(verdicts: list[SeriesVerdict], endpoints: dict[int, _Endpoint]) -> set[str]:
    names = dict(VantagePoint.objects.values_list("id", "name"))
    sites = dict(
        Site.objects.filter(pk__in={e.site_id for e in endpoints.values()}).values_list(
            "id", "name"
        )
    )
    subjects: set[str] = set()
    for v in verdicts:
        endpoint = endpoints[v.endpoint_id]
        subjects.add(f"vp:{names[v.vantage_point_id]}")
        subjects.add(f"protocol:{endpoint.protocol}")
        subjects.add(f"site:{sites[endpoint.site_id]}")
        if endpoint.credential:
            subjects.add(f"credential:{endpoint.credential}")
    return subjects
