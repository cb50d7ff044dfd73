"""Who may change vantage points, sites and their endpoints (issue 10, item 11), through the
pages and the API alike: vantage points are an admin's and `local` is never renamed nor
deleted; a site and its endpoints are its owner's or an admin's (no owner: an admin's)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import EndpointFactory, SiteFactory, VantagePointFactory
from webapp.sites.models import Endpoint, Site, VantagePoint

pytestmark = pytest.mark.django_db


def api_for(client: Client) -> APIClient:
    api = APIClient()
    api.force_authenticate(client.user)  # type: ignore[attr-defined]
    return api


def owned_site(client: Client, name: str = "site-a") -> Site:
    return SiteFactory(name=name, owner=client.user)  # type: ignore[attr-defined]


def endpoint_body(site: Site, **fields: Any) -> dict[str, Any]:
    return {
        "site": site.pk,
        "name": "planted",
        "protocol": "root",
        "base_url": "root://storage.example.org:1094/",
        **fields,
    }


def _endpoint_form(site: Site, **fields: str) -> dict[str, str]:
    return {**endpoint_body(site), "role": "data", "enabled": "on", **fields}


def _state() -> list[object]:
    return [list(m.objects.values().order_by("pk")) for m in (Site, Endpoint, VantagePoint)]


# -- vantage points ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["local", "cern"])
def test_an_operator_cannot_rename_a_vantage_point_through_the_api_or_the_page(
    operator: Client, name: str
) -> None:
    vantage_point = VantagePointFactory(name=name)
    api = api_for(operator)
    answer = api.patch(f"/api/v1/vantage-points/{vantage_point.pk}/", {"name": "moved"})
    assert answer.status_code == 403
    assert "only an admin" in answer.json()["detail"]
    page = operator.post(f"/vantage-points/{vantage_point.pk}/edit/", {"name": "moved"})
    assert page.status_code == 403
    assert api.delete(f"/api/v1/vantage-points/{vantage_point.pk}/").status_code == 403
    assert list(VantagePoint.objects.values_list("name", flat=True)) == [name]


def test_an_operator_cannot_create_a_vantage_point_and_is_not_offered_to(
    operator: Client,
) -> None:
    VantagePointFactory(name="cern")
    answer = api_for(operator).post("/api/v1/vantage-points/", {"name": "mine"})
    assert answer.status_code == 403
    assert operator.post("/vantage-points/new/", {"name": "mine"}).status_code == 403
    assert operator.get("/vantage-points/new/").status_code == 403
    listing = operator.get("/vantage-points/").content.decode()
    assert "-Q vantage.cern" in listing  # operators and viewers see them
    assert "New vantage point" not in listing
    assert "/edit/" not in listing
    assert not VantagePoint.objects.filter(name="mine").exists()


def test_an_admin_creates_renames_and_deletes_a_vantage_point(admin: Client) -> None:
    api = api_for(admin)
    created = api.post("/api/v1/vantage-points/", {"name": "desy"})
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert "New vantage point" in admin.get("/vantage-points/").content.decode()
    assert admin.post(f"/vantage-points/{pk}/edit/", {"name": "desy-zeuthen"}).status_code == 302
    assert api.patch(f"/api/v1/vantage-points/{pk}/", {"name": "desy-hh"}).status_code == 200
    assert VantagePoint.objects.get(pk=pk).name == "desy-hh"
    assert api.delete(f"/api/v1/vantage-points/{pk}/").status_code == 204


def test_not_even_an_admin_renames_or_deletes_local(admin: Client) -> None:
    local = VantagePointFactory(name="local")
    api = api_for(admin)
    renamed = api.patch(f"/api/v1/vantage-points/{local.pk}/", {"name": "moved"})
    assert renamed.status_code == 400
    assert "cannot be renamed" in renamed.json()["name"][0]
    page = admin.post(f"/vantage-points/{local.pk}/edit/", {"name": "moved"})
    assert page.status_code == 200
    assert 'id="id_name_error"' in page.content.decode()
    assert "cannot be renamed" in page.content.decode()
    deleted = api.delete(f"/api/v1/vantage-points/{local.pk}/")
    assert deleted.status_code == 409
    assert "cannot be deleted" in deleted.json()["detail"]
    # Its location and description stay an admin's to change.
    kept = api.patch(f"/api/v1/vantage-points/{local.pk}/", {"name": "local", "location": "lab"})
    assert kept.status_code == 200
    assert VantagePoint.objects.get(pk=local.pk).location == "lab"


# -- sites and their endpoints ---------------------------------------------------------------


def test_an_operator_cannot_add_an_endpoint_to_another_operators_site_through_the_api(
    operator: Client, other_operator: Client
) -> None:
    site = owned_site(operator)
    answer = api_for(other_operator).post("/api/v1/endpoints/", endpoint_body(site))
    assert answer.status_code == 403
    assert f"site {site.name}" in answer.json()["detail"]
    assert not Endpoint.objects.exists()
    created = api_for(operator).post("/api/v1/endpoints/", endpoint_body(site))
    assert created.status_code == 201, created.content


def test_an_operator_cannot_add_an_endpoint_to_another_operators_site_through_the_page(
    operator: Client, other_operator: Client
) -> None:
    site = owned_site(operator)
    before = _state()
    assert other_operator.post("/endpoints/new/", _endpoint_form(site)).status_code == 403
    assert other_operator.get(f"/endpoints/new/?site={site.pk}").status_code == 403
    assert _state() == before
    page = other_operator.get(f"/sites/{site.pk}/").content.decode()
    assert "Add endpoint" not in page
    # The form offers only the sites one may add to.
    own = owned_site(other_operator, "site-b")
    form = other_operator.get("/endpoints/new/").content.decode()
    assert f'<option value="{own.pk}"' in form
    assert f'<option value="{site.pk}"' not in form

    assert "Add endpoint" in operator.get(f"/sites/{site.pk}/").content.decode()
    assert operator.post("/endpoints/new/", _endpoint_form(site)).status_code == 302


def test_an_admin_adds_an_endpoint_to_any_site(operator: Client, admin: Client) -> None:
    site = owned_site(operator)
    lab_site = SiteFactory(name="lab")  # no owner: an admin's
    assert api_for(admin).post("/api/v1/endpoints/", endpoint_body(site)).status_code == 201
    form = _endpoint_form(lab_site, name="lab-root")
    assert admin.post("/endpoints/new/", form).status_code == 302
    assert (
        api_for(operator)
        .post("/api/v1/endpoints/", endpoint_body(lab_site, name="x"))
        .json()["detail"]
        .startswith("site lab:")
    )


def test_an_endpoint_is_changed_by_its_sites_owner_not_by_who_added_it(
    operator: Client, other_operator: Client
) -> None:
    """An endpoint another operator put on a site (before sites had this rule) is the site's."""
    site = owned_site(operator)
    planted = EndpointFactory(site=site, owner=other_operator.user)  # type: ignore[attr-defined]
    intruder = api_for(other_operator)
    changed = intruder.patch(f"/api/v1/endpoints/{planted.pk}/", {"base_url": "root://evil:1/"})
    assert changed.status_code == 403
    assert intruder.delete(f"/api/v1/endpoints/{planted.pk}/").status_code == 403
    assert other_operator.post(f"/endpoints/{planted.pk}/disable/").status_code == 403
    planted.refresh_from_db()
    assert (planted.base_url, planted.enabled) == ("root://127.0.0.1:1094/", True)

    owner = api_for(operator)
    assert owner.patch(f"/api/v1/endpoints/{planted.pk}/", {"enabled": False}).status_code == 200
    assert owner.delete(f"/api/v1/endpoints/{planted.pk}/").status_code == 204


def test_an_endpoint_is_not_moved_to_another_operators_site(
    operator: Client, other_operator: Client
) -> None:
    theirs = owned_site(operator)
    mine = owned_site(other_operator, "site-b")
    endpoint = EndpointFactory(site=mine, owner=other_operator.user)  # type: ignore[attr-defined]
    api = api_for(other_operator)
    moved = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"site": theirs.pk})
    assert moved.status_code == 403
    form = {**_endpoint_form(theirs, name=endpoint.name), "base_url": endpoint.base_url}
    assert other_operator.post(f"/endpoints/{endpoint.pk}/edit/", form).status_code == 403
    endpoint.refresh_from_db()
    assert endpoint.site == mine


def test_an_operator_cannot_change_or_delete_another_operators_site_through_the_api(
    operator: Client, other_operator: Client, admin: Client
) -> None:
    site = owned_site(operator)
    intruder = api_for(other_operator)
    assert intruder.patch(f"/api/v1/sites/{site.pk}/", {"tier": "T0"}).status_code == 403
    assert intruder.delete(f"/api/v1/sites/{site.pk}/").status_code == 403
    assert api_for(operator).patch(f"/api/v1/sites/{site.pk}/", {"tier": "T1"}).status_code == 200
    assert api_for(admin).delete(f"/api/v1/sites/{site.pk}/").status_code == 204


def test_creating_a_site_stays_open_to_operators_who_then_own_it(operator: Client) -> None:
    created = api_for(operator).post("/api/v1/sites/", {"name": "ral"})
    assert created.status_code == 201
    assert created.json()["owner"] == "operator"
    assert Site.objects.get(name="ral").owner == User.objects.get(username="operator")
    SiteFactory(name="lab")
    listed = api_for(operator).get("/api/v1/sites/").json()["results"]
    assert [(s["name"], s["owner"]) for s in listed] == [("lab", None), ("ral", "operator")]


def test_the_django_admin_keeps_locals_name_and_offers_no_delete(operator: Client) -> None:
    """The admin site lets in staff only (setrole makes nobody staff): a superuser here."""
    local, other = VantagePointFactory(name="local"), VantagePointFactory(name="cern")
    root = Client()
    root.force_login(User.objects.create_superuser("root-admin", password="x"))
    page = root.get(f"/admin/sites/vantagepoint/{local.pk}/change/").content.decode()
    assert 'name="name"' not in page  # read-only
    assert root.get(f"/admin/sites/vantagepoint/{local.pk}/delete/").status_code == 403
    root.post(f"/admin/sites/vantagepoint/{local.pk}/change/", {"name": "moved"})
    assert VantagePoint.objects.filter(pk=local.pk, name="local").exists()
    assert root.get(f"/admin/sites/vantagepoint/{other.pk}/delete/").status_code == 200
    assert operator.get("/admin/sites/vantagepoint/").status_code == 302  # to the admin's login
