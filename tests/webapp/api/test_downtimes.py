"""/api/v1/downtimes/: viewers read, a site's owner (or an admin) declares, changes and
deletes its site's and endpoints' downtimes; bad input answers 400 naming the field and
stores nothing; filters; and downtimes_covering, the read the watch and availability share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.webapp.factories import EndpointFactory, SiteFactory, api_for, user
from webapp.sites.downtimes import downtimes_covering
from webapp.sites.models import Downtime, Endpoint, Site

pytestmark = pytest.mark.django_db

URL = "/api/v1/downtimes/"


@pytest.fixture
def owner() -> User:
    return user("owner", "operator")


@pytest.fixture
def site(owner: User) -> Site:
    return SiteFactory(name="down-site", owner=owner)


@pytest.fixture
def endpoint(site: Site) -> Endpoint:
    return EndpointFactory(site=site, name="down-root")


def body(**fields: Any) -> dict[str, Any]:
    now = timezone.now()
    return {
        "start": (now - timedelta(hours=1)).isoformat(),
        "end": (now + timedelta(hours=2)).isoformat(),
        "severity": "outage",
        "scheduled": True,
        "description": "dCache upgrade",
        **fields,
    }


def test_the_sites_owner_declares_a_site_and_an_endpoint_downtime(
    owner: User, site: Site, endpoint: Endpoint
) -> None:
    api = api_for(owner)
    made = api.post(URL, body(site=site.pk), format="json")
    assert made.status_code == 201, made.content
    assert made.json()["created_by"] == "owner" and made.json()["active"] is True
    assert api.post(URL, body(endpoint=endpoint.pk), format="json").status_code == 201
    assert Downtime.objects.filter(site=site).count() == 1
    assert Downtime.objects.filter(endpoint=endpoint).count() == 1


def test_another_operator_may_not_declare_on_the_site_but_an_admin_may(
    site: Site, endpoint: Endpoint
) -> None:
    other = api_for(user("other", "operator"))
    assert other.post(URL, body(site=site.pk), format="json").status_code == 403
    assert other.post(URL, body(endpoint=endpoint.pk), format="json").status_code == 403
    viewer = api_for(user("viewer", "viewer"))
    assert viewer.post(URL, body(site=site.pk), format="json").status_code == 403
    assert not Downtime.objects.exists()
    admin = api_for(user("admin", "admin"))
    assert admin.post(URL, body(site=site.pk), format="json").status_code == 201
    assert viewer.get(URL).json()["count"] == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"end": "2020-01-01T00:00:00Z", "start": "2020-01-02T00:00:00Z"}, "end"),
        ({"end": "2020-01-01T00:00:00Z", "start": "2020-01-01T00:00:00Z"}, "end"),
        ({"both": True}, "site"),
        ({"neither": True}, "site"),
        ({"site": 987654}, "site"),
        ({"severity": "down"}, "severity"),
        ({"start": "yesterday"}, "start"),
        ({"scheduled": None}, "scheduled"),
    ],
)
def test_bad_input_answers_400_naming_the_field_and_stores_nothing(
    owner: User, site: Site, endpoint: Endpoint, fields: dict[str, Any], field: str
) -> None:
    where: dict[str, Any] = {"site": site.pk}
    if fields.pop("both", False):
        where["endpoint"] = endpoint.pk
    if fields.pop("neither", False):
        where = {}
    answer = api_for(owner).post(URL, body(**{**where, **fields}), format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()
    assert not Downtime.objects.exists()


def test_patch_checks_the_whole_downtime_and_delete_is_the_owners(owner: User, site: Site) -> None:
    api = api_for(owner)
    made = api.post(URL, body(site=site.pk), format="json").json()
    url = f"{URL}{made['id']}/"
    early = (timezone.now() - timedelta(days=1)).isoformat()
    assert api.patch(url, {"end": early}, format="json").json() == {
        "end": ["the downtime must end after it starts"]
    }
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert api.patch(url, {"end": later.isoformat()}, format="json").status_code == 200
    assert Downtime.objects.get().end == later
    other = api_for(user("other", "operator"))
    assert other.patch(url, {"severity": "warning"}, format="json").status_code == 403
    assert other.delete(url).status_code == 403
    assert api.delete(url).status_code == 204
    assert not Downtime.objects.exists()


def test_filters_by_site_endpoint_active_and_window(site: Site, endpoint: Endpoint) -> None:
    now = timezone.now()
    sibling = EndpointFactory(site=site, name="down-https")
    elsewhere = EndpointFactory(name="far-away")

    def make(name: str, start_h: int, end_h: int, **where: Any) -> Downtime:
        return Downtime.objects.create(
            start=now + timedelta(hours=start_h),
            end=now + timedelta(hours=end_h),
            severity="outage",
            scheduled=True,
            description=name,
            **where,
        )

    make("site-now", -1, 1, site=site)
    make("endpoint-next-week", 24 * 7, 24 * 7 + 2, endpoint=endpoint)
    make("sibling-past", -48, -47, endpoint=sibling)
    make("far-now", -1, 1, endpoint=elsewhere)
    api = api_for(user("viewer", "viewer"))

    def names(query: str) -> set[str]:
        answer = api.get(f"{URL}?{query}")
        assert answer.status_code == 200, answer.content
        return {row["description"] for row in answer.json()["results"]}

    assert names(f"site={site.pk}") == {"site-now", "endpoint-next-week", "sibling-past"}
    assert names(f"endpoint={endpoint.pk}") == {"site-now", "endpoint-next-week"}
    assert names("active=true") == {"site-now", "far-now"}
    assert names("active=false") == {"endpoint-next-week", "sibling-past"}
    since = (now + timedelta(hours=2)).isoformat().replace("+", "%2B")
    assert names(f"since={since}") == {"endpoint-next-week"}
    until = (now - timedelta(hours=12)).isoformat().replace("+", "%2B")
    assert names(f"until={until}") == {"sibling-past"}
    for bad in ("active=perhaps", "since=soon", "site=0", "endpoint=x"):
        answer = api.get(f"{URL}?{bad}")
        assert answer.status_code == 400 and bad.split("=")[0] in answer.json(), bad


def test_an_endpoint_is_covered_by_its_own_and_its_sites_downtimes(
    site: Site, endpoint: Endpoint
) -> None:
    now = timezone.now()
    sibling = EndpointFactory(site=site, name="down-https")
    common = {"severity": "outage", "scheduled": False}
    whole = Downtime.objects.create(site=site, start=now, end=now + timedelta(hours=1), **common)
    own = Downtime.objects.create(
        endpoint=endpoint, start=now + timedelta(hours=3), end=now + timedelta(hours=4), **common
    )
    Downtime.objects.create(  # outside the window
        endpoint=sibling, start=now - timedelta(days=2), end=now - timedelta(days=1), **common
    )
    covering = downtimes_covering(
        endpoint_ids=[endpoint.pk, sibling.pk],
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=5),
    )
    assert covering == {endpoint.pk: [whole, own], sibling.pk: [whole]}


def test_ids_past_64_bits_answer_400_or_404_never_500(owner: User) -> None:
    huge = 2**70
    api = api_for(owner)
    assert api.get(f"{URL}?site={huge}").status_code == 400
    assert api.get(f"{URL}?endpoint={huge}").status_code == 400
    assert api.get(f"/api/v1/availability/?site={huge}").status_code == 400
    assert api.get(f"{URL}{huge}/").status_code == 404
    assert api.post(URL, body(site=huge), format="json").status_code == 400


def test_a_patch_answers_every_field_also_when_the_creator_is_gone(owner: User, site: Site) -> None:
    """created_by is null once its user is deleted; the PATCH's answer still carries it (a
    read-only field with a default is left out of partial updates' answers in DRF)."""
    api = api_for(user("admin", "admin"))
    made = api.post(URL, body(site=site.pk), format="json").json()
    Downtime.objects.filter(pk=made["id"]).update(created_by=None)
    answer = api.patch(f"{URL}{made['id']}/", {"description": "moved"}, format="json").json()
    assert set(answer) == set(made)
    assert answer["created_by"] is None
