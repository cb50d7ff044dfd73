"""Whose fault it is: each blame rule groups a night's bad series under one regression, and
just under its thresholds it does not."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.webapp.factories import EndpointFactory, SiteFactory, jwt
from tests.webapp.watch.nights import NIGHT_ONE, at, run, series
from webapp.sites.models import Downtime, Endpoint, Site
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db


def endpoints(count: int, **fields: object) -> list[Endpoint]:
    return [EndpointFactory(site=SiteFactory(), **fields) for _ in range(count)]


def https(count: int, **fields: object) -> list[Endpoint]:
    return endpoints(count, protocol="https", base_url="https://127.0.0.1:8443/", **fields)


def night_of(bad: dict[str, list[Endpoint]], good: dict[str, list[Endpoint]]) -> None:
    """One night: the endpoints in `bad` time out from those vantage points, `good` succeed;
    then the watch's pass."""
    for point, failing in bad.items():
        for endpoint in failing:
            run(series(endpoint=endpoint, vantage_point=point), NIGHT_ONE, status="timeout")
    for point, fine in good.items():
        for endpoint in fine:
            run(series(endpoint=endpoint, vantage_point=point), NIGHT_ONE, throughput_mbps=10.0)
    watch_evaluate(now=at(NIGHT_ONE + timedelta(days=1)))


def groups() -> dict[str, Regression]:
    return {
        r.key: r for r in Regression.objects.filter(key__regex=r"^(vp|protocol|credential|site):")
    }


def members(group: Regression) -> int:
    return Regression.objects.filter(parent=group).count()


def test_vantage_point_bad_against_many_sites_others_see_good_is_blamed_once() -> None:
    sites = endpoints(4)
    night_of(bad={"a": sites[:3]}, good={"a": sites[3:], "b": sites})
    found = groups()
    assert list(found) == ["vp:a:availability"]
    group = found["vp:a:availability"]
    assert group.blame["target"] == "vantage-point"
    assert (group.blame["bad_sites"], group.blame["measured_sites"]) == (3, 4)
    assert members(group) == 3
    assert group.vantage_point is not None and group.vantage_point.name == "a"


def test_vantage_point_bad_against_fewer_than_three_sites_is_not_blamed() -> None:
    sites = endpoints(3)
    night_of(bad={"a": sites[:2]}, good={"a": sites[2:], "b": sites})
    assert groups() == {}
    assert Regression.objects.filter(parent=None, metric="availability").count() == 2


def test_vantage_point_bad_against_under_half_its_sites_is_not_blamed() -> None:
    sites = endpoints(7)
    night_of(bad={"a": sites[:3]}, good={"a": sites[3:], "b": sites})
    assert groups() == {}


def test_protocol_failing_everywhere_is_blamed_not_each_site() -> None:
    failing, fine = https(3), endpoints(1)
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    found = groups()
    assert list(found) == ["protocol:https:availability"]
    assert found["protocol:https:availability"].protocol == "https"
    assert members(found["protocol:https:availability"]) == 6


def test_protocol_failing_at_two_sites_is_not_blamed_each_site_is() -> None:
    failing, fine = https(2), endpoints(2)
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    assert sorted(k.split(":")[0] for k in groups()) == ["site", "site"]


def test_one_credential_failing_everywhere_is_blamed_on_it() -> None:
    token = jwt(iss="https://iam.example.org", sub="prober", exp=4102444800)
    failing = https(3, credential_kind="token", credential=token)
    fine = https(3)
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    found = groups()
    assert list(found) == ["credential:token https://iam.example.org:availability"]
    group = next(iter(found.values()))
    assert group.blame["target"] == "credential"
    assert group.blame["bad_sites"] == 3


def test_credential_failing_at_two_sites_is_not_blamed() -> None:
    token = jwt(iss="https://iam.example.org", sub="prober", exp=4102444800)
    failing = https(2, credential_kind="token", credential=token)
    fine = https(3)
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    assert not any(k.startswith("credential:") for k in groups())


def test_site_bad_from_every_vantage_point_is_the_sites() -> None:
    sites = endpoints(4)
    night_of(bad={"a": sites[:1], "b": sites[:1]}, good={"a": sites[1:], "b": sites[1:]})
    found = groups()
    assert list(found) == [f"site:{sites[0].site.name}:availability"]
    assert found[f"site:{sites[0].site.name}:availability"].site == sites[0].site


def test_site_bad_from_one_of_two_vantage_points_is_not_the_sites() -> None:
    sites = endpoints(4)
    night_of(bad={"a": sites[:1]}, good={"a": sites[1:], "b": sites})
    assert groups() == {}


def test_group_recovers_when_its_rule_no_longer_holds() -> None:
    sites = endpoints(4)
    night_of(bad={"a": sites[:3]}, good={"a": sites[3:], "b": sites})
    for point in ("a", "b"):
        for endpoint in sites:
            run(
                series(endpoint=endpoint, vantage_point=point),
                NIGHT_ONE + timedelta(days=1),
                throughput_mbps=10.0,
            )
    watch_evaluate(now=at(NIGHT_ONE + timedelta(days=2)))
    assert groups()["vp:a:availability"].state == Regression.State.RECOVERING


def warning_downtime(*, site: Site | None = None, endpoint: Endpoint | None = None) -> None:
    """A warning (not an outage) downtime over NIGHT_ONE: the night is still evaluated."""
    Downtime.objects.create(
        site=site,
        endpoint=endpoint,
        start=at(NIGHT_ONE, 0),
        end=at(NIGHT_ONE + timedelta(days=1), 0),
        severity=Downtime.Severity.WARNING,
        scheduled=True,
    )


def test_site_in_a_warning_downtime_bad_from_every_vantage_point_opens_nothing() -> None:
    sites = endpoints(4)
    warning_downtime(site=sites[0].site)
    night_of(bad={"a": sites[:1], "b": sites[:1]}, good={"a": sites[1:], "b": sites[1:]})
    assert groups() == {}
    assert not Regression.objects.exists()


def test_protocol_failing_everywhere_in_downtime_opens_nothing() -> None:
    failing, fine = https(3), endpoints(1)
    for endpoint in failing:
        warning_downtime(endpoint=endpoint)
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    assert groups() == {}
    assert not Regression.objects.exists()


def test_protocol_group_leaves_out_its_endpoints_in_downtime() -> None:
    failing, fine = https(4), endpoints(1)
    warning_downtime(endpoint=failing[0])
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    group = groups()["protocol:https:availability"]
    assert (group.blame["bad_endpoints"], group.blame["measured_endpoints"]) == (3, 3)
    assert members(group) == 6
    assert not Regression.objects.filter(endpoint=failing[0]).exists()


def test_protocol_failing_everywhere_out_of_downtime_still_opens() -> None:
    failing, fine = https(3), endpoints(1)
    warning_downtime(endpoint=fine[0])
    night_of(bad={"a": failing, "b": failing}, good={"a": fine, "b": fine})
    assert list(groups()) == ["protocol:https:availability"]
    assert groups()["protocol:https:availability"].state == Regression.State.OPEN
