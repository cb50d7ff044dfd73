"""The downtimes' pages: the site and endpoint pages list current and upcoming downtimes
with a form to declare one (the site's owner and admins) and delete it; /downtimes/ lists
them all; bad input shows the field's error and stores nothing. The site page's A/R table."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.webapp.factories import EndpointFactory, SiteFactory, page_for, user
from webapp.sites.models import Downtime, Endpoint, Site

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner() -> User:
    return user("owner", "operator")


@pytest.fixture
def site(owner: User) -> Site:
    return SiteFactory(name="page-site", owner=owner)


@pytest.fixture
def endpoint(site: Site) -> Endpoint:
    return EndpointFactory(site=site, name="page-root")


def declare(where: dict[str, Any], hours: tuple[int, int], text: str) -> Downtime:
    now = timezone.now()
    return Downtime.objects.create(
        **where,
        start=now + timedelta(hours=hours[0]),
        end=now + timedelta(hours=hours[1]),
        severity="outage",
        scheduled=True,
        description=text,
    )


def form(where: dict[str, Any], start: str, end: str, next_url: str) -> dict[str, Any]:
    return {
        "start": start,
        "end": end,
        "severity": "outage",
        "scheduled": "on",
        "description": "disk swap",
        "next": next_url,
        **where,
    }


def test_site_and_endpoint_pages_list_current_and_upcoming_downtimes(
    owner: User, site: Site, endpoint: Endpoint
) -> None:
    declare({"site": site}, (-1, 1), "site-now")
    declare({"endpoint": endpoint}, (24, 26), "endpoint-tomorrow")
    declare({"site": site}, (-48, -47), "site-past")
    page = page_for(owner)
    html = page.get(f"/sites/{site.pk}/").content.decode()
    assert "site-now" in html and "endpoint-tomorrow" in html and "site-past" not in html
    assert 'id="downtime-form"' in html
    endpoint_html = page.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert "site-now" in endpoint_html and "endpoint-tomorrow" in endpoint_html
    other = page_for(user("other", "operator")).get(f"/sites/{site.pk}/").content.decode()
    assert "site-now" in other and 'id="downtime-form"' not in other


def test_the_owner_declares_and_deletes_from_the_site_page(owner: User, site: Site) -> None:
    page = page_for(owner)
    back = f"/sites/{site.pk}/"
    made = page.post(
        "/downtimes/new/", form({"site": site.pk}, "2030-01-01T10:00", "2030-01-01T12:00", back)
    )
    assert made.status_code == 302 and made["Location"] == back
    downtime = Downtime.objects.get()
    assert (downtime.site, downtime.scheduled, downtime.created_by) == (site, True, owner)
    refused = page_for(user("other", "operator")).post(
        f"/downtimes/{downtime.pk}/delete/", {"next": back}
    )
    assert refused.status_code == 403 and Downtime.objects.exists()
    assert page.post(f"/downtimes/{downtime.pk}/delete/", {"next": back})["Location"] == back
    assert not Downtime.objects.exists()


@pytest.mark.parametrize(
    "case",
    [
        (("2030-01-01T12:00", "2030-01-01T10:00"), "site", "end: the downtime must end"),
        (("2030-01-01T10:00", "2030-01-01T12:00"), "both", "site: give a site or an endpoint"),
        (("tomorrow", "2030-01-01T12:00"), "site", "start: "),
    ],
)
def test_bad_input_shows_the_fields_error_and_stores_nothing(
    owner: User, site: Site, endpoint: Endpoint, case: tuple[tuple[str, str], str, str]
) -> None:
    dates, where, error = case
    chosen = {"site": site.pk, "endpoint": endpoint.pk} if where == "both" else {"site": site.pk}
    answer = page_for(owner).post("/downtimes/new/", form(chosen, *dates, "/downtimes/"))
    assert answer.status_code == 400
    assert error in answer.content.decode()
    assert not Downtime.objects.exists()


def test_an_operator_may_not_declare_for_anothers_site(site: Site) -> None:
    answer = page_for(user("other", "operator")).post(
        "/downtimes/new/", form({"site": site.pk}, "2030-01-01T10:00", "2030-01-01T12:00", "/")
    )
    assert answer.status_code == 403 and not Downtime.objects.exists()


def test_the_list_page_shows_all_and_filters(site: Site, endpoint: Endpoint) -> None:
    declare({"site": site}, (-1, 1), "site-now")
    declare({"endpoint": EndpointFactory(name="elsewhere")}, (-48, -47), "far-past")
    page = page_for(user("viewer", "viewer"))
    html = page.get("/downtimes/").content.decode()
    assert "site-now" in html and "far-past" in html
    active = page.get("/downtimes/?active=true").content.decode()
    assert "site-now" in active and "far-past" not in active
    of_site = page.get(f"/downtimes/?site={site.pk}").content.decode()
    assert "site-now" in of_site and "far-past" not in of_site


def test_site_page_states_the_availability_formula_per_endpoint_and_month(
    owner: User, site: Site, endpoint: Endpoint
) -> None:
    html = page_for(owner).get(f"/sites/{site.pk}/").content.decode()
    table = html.split('id="availability-table"')[1].split("</table>")[0]
    assert "availability = up / (total - unknown)" in html
    assert "reliability = up / (total - scheduled downtime - unknown)" in html
    assert timezone.now().strftime("%Y-%m") in table
    assert "site page-site" in table and "page-root" in table
