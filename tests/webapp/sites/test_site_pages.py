"""Site and endpoint pages: who sees and does what, forms that name bad fields, inert names."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.webapp.factories import (
    EndpointFactory,
    RunFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)>"


def _endpoint_form(on_site: Site, **fields: str) -> dict[str, str]:
    data = {
        "site": str(on_site.pk),
        "name": "new-root",
        "protocol": "root",
        "base_url": "root://storage.example.org:1094/",
        "role": "data",
        "enabled": "on",
        "credential": "",
    }
    data.update(fields)
    return data


def _state() -> list[object]:
    """Everything a POST could change, to compare before and after."""
    return [
        list(Site.objects.values().order_by("pk")),
        list(Endpoint.objects.values().order_by("pk")),
        list(TestFile.objects.values().order_by("pk")),
        list(VantagePoint.objects.values().order_by("pk")),
    ]


def test_every_page_renders_for_a_viewer_without_action_buttons(viewer: Client) -> None:
    run = RunFactory()
    endpoint, site = run.endpoint, run.endpoint.site
    pages = [
        "/sites/",
        f"/sites/{site.pk}/",
        f"/endpoints/{endpoint.pk}/",
        "/vantage-points/",
    ]
    for page in pages:
        response = viewer.get(page)
        assert response.status_code == 200, page
        text = response.content.decode()
        for action in ("New site", "Edit site", "Add endpoint", "Test connection", "Disable"):
            assert action not in text, (page, action)
    detail = viewer.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert run.test_file.path in detail
    assert f'href="/runs/{run.pk}/"' in detail


def test_site_list_shows_endpoint_counts_protocols_and_disabled_ones(viewer: Client) -> None:
    site = SiteFactory(name="atlas-t2")
    EndpointFactory(site=site, protocol="root", base_url="root://a.example.org/")
    EndpointFactory(site=site, protocol="https", base_url="https://a.example.org/", enabled=False)
    text = viewer.get("/sites/").content.decode()
    row = text[text.index("atlas-t2") : text.index("</tr>", text.index("atlas-t2"))]
    assert "https, root" in row
    assert '<td class="num">2</td>' in row
    assert "1 disabled" in row


def test_site_list_queries_do_not_grow_with_the_sites(viewer: Client) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get("/sites/").status_code == 200
        return len(captured)

    EndpointFactory()
    few = queries()
    for _ in range(5):
        EndpointFactory(site=EndpointFactory().site)
    assert queries() == few


def test_site_detail_lists_its_endpoints_with_their_facts(viewer: Client) -> None:
    endpoint = TestFileFactory(endpoint__role="cache").endpoint
    text = viewer.get(f"/sites/{endpoint.site.pk}/").content.decode()
    assert endpoint.name in text
    assert endpoint.base_url in text
    assert "cache" in text
    assert "enabled" in text


@pytest.mark.parametrize(
    "path",
    [
        "/sites/new/",
        "/sites/{site}/edit/",
        "/endpoints/new/",
        "/endpoints/{endpoint}/edit/",
        "/endpoints/{endpoint}/disable/",
        "/endpoints/{endpoint}/enable/",
        "/endpoints/{endpoint}/test/",
        "/endpoints/{endpoint}/files/",
        "/endpoints/{endpoint}/files/{file}/remove/",
        "/vantage-points/new/",
        "/vantage-points/{vantage_point}/edit/",
    ],
)
def test_viewer_posts_are_forbidden_and_change_nothing(viewer: Client, path: str) -> None:
    test_file = TestFileFactory()
    endpoint = test_file.endpoint
    ids = {
        "site": endpoint.site.pk,
        "endpoint": endpoint.pk,
        "file": test_file.pk,
        "vantage_point": VantagePointFactory().pk,
    }
    data = {
        **_endpoint_form(endpoint.site, name="changed"),
        "path": "/other",
        "size": "10",
        "location": "changed",
    }
    before = _state()
    response = viewer.post(path.format(**ids), data)
    assert response.status_code == 403
    assert _state() == before


def test_operator_creates_a_site_and_an_endpoint_through_the_forms(operator: Client) -> None:
    assert "New site" in operator.get("/sites/").content.decode()
    response = operator.post(
        "/sites/new/", {"name": "cern-eos", "tier": "T0", "storage_system": "EOS"}, follow=True
    )
    site = Site.objects.get(name="cern-eos")
    assert site.owner == operator.user  # type: ignore[attr-defined]
    assert response.redirect_chain[-1][0] == f"/sites/{site.pk}/"
    assert "Site cern-eos was created." in response.content.decode()

    form = operator.get(f"/endpoints/new/?site={site.pk}").content.decode()
    assert f'<option value="{site.pk}" selected>' in form
    response = operator.post("/endpoints/new/", _endpoint_form(site, name="eos-root"), follow=True)
    endpoint = Endpoint.objects.get(name="eos-root")
    assert (endpoint.site, endpoint.protocol, endpoint.enabled) == (site, "root", True)
    assert endpoint.owner == operator.user  # type: ignore[attr-defined]
    assert response.redirect_chain[-1][0] == f"/endpoints/{endpoint.pk}/"
    assert "Endpoint eos-root was created." in response.content.decode()
    assert "eos-root" in operator.get(f"/sites/{site.pk}/").content.decode()
    assert "cern-eos" in operator.get("/sites/").content.decode()


def test_operator_cannot_edit_another_operators_site_but_an_admin_can(
    operator: Client, other_operator: Client, admin: Client
) -> None:
    operator.post("/sites/new/", {"name": "mine"})
    site = Site.objects.get(name="mine")
    edit = f"/sites/{site.pk}/edit/"

    assert "Edit site" not in other_operator.get(f"/sites/{site.pk}/").content.decode()
    assert other_operator.get(edit).status_code == 403
    assert other_operator.post(edit, {"name": "taken-over"}).status_code == 403
    site.refresh_from_db()
    assert site.name == "mine"

    assert "Edit site" in admin.get(f"/sites/{site.pk}/").content.decode()
    assert admin.get(edit).status_code == 200
    assert admin.post(edit, {"name": "renamed", "tier": "T1"}).status_code == 302
    site.refresh_from_db()
    assert (site.name, site.tier) == ("renamed", "T1")
    assert site.owner == operator.user  # type: ignore[attr-defined]


def test_owner_edits_its_site(operator: Client) -> None:
    operator.post("/sites/new/", {"name": "mine"})
    site = Site.objects.get(name="mine")
    assert "Edit site" in operator.get(f"/sites/{site.pk}/").content.decode()
    response = operator.post(f"/sites/{site.pk}/edit/", {"name": "mine", "location": "Geneva"})
    assert response.status_code == 302
    site.refresh_from_db()
    assert site.location == "Geneva"


def test_operator_cannot_change_another_operators_endpoint(
    operator: Client, other_operator: Client
) -> None:
    owner = User.objects.get(username="operator")
    endpoint = TestFileFactory(endpoint__owner=owner).endpoint
    before = _state()
    for path in ("edit/", "disable/", "files/"):
        response = other_operator.post(
            f"/endpoints/{endpoint.pk}/{path}", {**_endpoint_form(endpoint.site), "path": "/x"}
        )
        assert response.status_code == 403, path
    assert _state() == before
    page = other_operator.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert "Edit endpoint" not in page
    assert "Test connection" in page  # testing changes nothing: any operator may


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "bad name!"}, "name"),
        ({"name": ""}, "name"),
        ({"protocol": "gopher"}, "protocol"),
        ({"base_url": ""}, "base_url"),
        ({"base_url": "gopher://storage.example.org/"}, "base_url"),
        ({"base_url": "https://storage.example.org/"}, "base_url"),  # not the protocol's scheme
        ({"base_url": "-oProxyCommand=x"}, "base_url"),
        ({"base_url": "root://169.254.169.254:1094/"}, "base_url"),  # egress policy
        ({"role": "tape"}, "role"),
        ({"site": "999999"}, "site"),
    ],
)
def test_bad_endpoint_input_names_the_field_and_creates_nothing(
    operator: Client, fields: dict[str, str], field: str
) -> None:
    site = SiteFactory(owner=operator.user)  # type: ignore[attr-defined]
    before = _state()
    response = operator.post("/endpoints/new/", _endpoint_form(site, **fields))
    assert response.status_code == 200
    assert f'id="id_{field}_error"' in response.content.decode()
    assert f"{field}: " in response.content.decode()
    assert _state() == before


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "taken"}, "name"),
    ],
)
def test_bad_site_input_names_the_field_and_creates_nothing(
    operator: Client, data: dict[str, str], field: str
) -> None:
    SiteFactory(name="taken")
    before = _state()
    response = operator.post("/sites/new/", data)
    assert response.status_code == 200
    assert f'id="id_{field}_error"' in response.content.decode()
    assert _state() == before


def test_bad_edit_changes_nothing(operator: Client) -> None:
    operator.post("/sites/new/", {"name": "mine"})
    site = Site.objects.get(name="mine")
    operator.post("/endpoints/new/", _endpoint_form(site, name="mine-root"))
    endpoint = Endpoint.objects.get(name="mine-root")
    before = _state()
    response = operator.post(
        f"/endpoints/{endpoint.pk}/edit/", _endpoint_form(site, name="mine-root", protocol="x")
    )
    assert response.status_code == 200
    assert 'id="id_protocol_error"' in response.content.decode()
    assert _state() == before


def test_names_are_rendered_as_text_never_as_html(operator: Client) -> None:
    operator.post("/sites/new/", {"name": XSS, "location": XSS, "tier": "T2"})  # and its message
    site = Site.objects.get(name=XSS)
    operator.post("/endpoints/new/", _endpoint_form(site, name="xss-root"))
    endpoint = Endpoint.objects.get(name="xss-root")
    TestFileFactory(endpoint=endpoint, path=f"/data/{XSS}")
    VantagePointFactory(name="xss", location=XSS, description=XSS)
    pages = [
        "/sites/",
        f"/sites/{site.pk}/",
        f"/sites/{site.pk}/edit/",
        f"/endpoints/{endpoint.pk}/",
        f"/endpoints/{endpoint.pk}/edit/",
        "/endpoints/new/",
        "/vantage-points/",
    ]
    for page in pages:
        text = operator.get(page).content.decode()
        assert XSS not in text, page
        assert html.escape(XSS) in text, page
