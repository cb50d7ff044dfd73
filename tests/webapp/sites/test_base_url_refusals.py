"""Base URLs refused when an endpoint is written (API and form alike, naming base_url): a
password in the URL (the credential field is the place for secrets), and file:// paths
outside FEDPROBE_FILE_ROOTS."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from tests.webapp.factories import EndpointFactory, RunFactory, SiteFactory, TestFileFactory
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import Run
from webapp.campaigns.services import run_execute
from webapp.sites.forms import EndpointForm
from webapp.sites.models import Endpoint, Site

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> APIClient:
    user = User.objects.create_user("operator-user", password="x")
    user.groups.add(Group.objects.get(name="operator"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def own_site() -> Site:
    """A site of the API client's user: only its owner (or an admin) adds endpoints to it."""
    return SiteFactory(owner=User.objects.get(username="operator-user"))


@pytest.fixture
def file_root(settings: Any, tmp_path: Any) -> str:
    root = tmp_path / "data"
    root.mkdir()
    settings.FEDPROBE_FILE_ROOTS = [str(root)]
    return str(root)


def _form(protocol: str, base_url: str, name: str = "e1") -> EndpointForm:
    site = SiteFactory()
    data = {"site": site.pk, "name": name, "protocol": protocol, "base_url": base_url}
    return EndpointForm(data={**data, "role": "data", "enabled": True})


PASSWORD_URLS = [
    ("http", "http://user:s3cret@se.example.org/"),
    ("https", "https://user:s3cret@se.example.org:8443/data/"),
    ("root", "root://user:s3cret@se.example.org:1094/"),
    ("davs", "davs://:s3cret@se.example.org/"),
    ("gsiftp", "gsiftp://user:@se.example.org/"),
]


@pytest.mark.parametrize(("protocol", "base_url"), PASSWORD_URLS)
def test_a_base_url_with_a_password_is_refused_naming_base_url(
    api: APIClient, protocol: str, base_url: str
) -> None:
    body = {"site": own_site().pk, "name": "e1", "protocol": protocol, "base_url": base_url}
    answer = api.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 400, answer.json()
    message = answer.json()["base_url"][0]
    assert "password" in message and "credential" in message
    assert "s3cret" not in answer.content.decode()
    assert not Endpoint.objects.exists()


def test_changing_a_base_url_to_one_with_a_password_is_refused(api: APIClient) -> None:
    body = {"site": own_site().pk, "name": "e1", "protocol": "http", "base_url": "http://se/"}
    created = api.post("/api/v1/endpoints/", body, format="json").json()
    answer = api.patch(
        f"/api/v1/endpoints/{created['id']}/", {"base_url": "http://u:pw@se/"}, format="json"
    )
    assert answer.status_code == 400
    assert "base_url" in answer.json()
    assert Endpoint.objects.get(pk=created["id"]).base_url == "http://se/"


@pytest.mark.parametrize(("protocol", "base_url"), PASSWORD_URLS)
def test_the_endpoint_form_refuses_a_password_on_base_url(protocol: str, base_url: str) -> None:
    form = _form(protocol, base_url)
    assert not form.is_valid()
    assert "password" in form.errors["base_url"][0]
    assert "s3cret" not in str(form.errors)


@pytest.mark.parametrize("base_url", ["root://probe@se.example.org:1094/", "http://se:8000/"])
def test_a_user_name_without_password_is_still_accepted(api: APIClient, base_url: str) -> None:
    protocol = base_url.partition(":")[0]
    body = {"site": own_site().pk, "name": "e1", "protocol": protocol, "base_url": base_url}
    answer = api.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 201, answer.json()


OUTSIDE_ROOTS = ["file:///etc/", "file:///etc", "file://localhost/tmp/", "file:///"]


@pytest.mark.parametrize("base_url", [*OUTSIDE_ROOTS, "DATA/../escape/"])
def test_a_file_base_url_outside_the_file_roots_is_refused_naming_base_url(
    api: APIClient, file_root: str, base_url: str
) -> None:
    base_url = base_url.replace("DATA", f"file://{file_root}")
    body = {"site": own_site().pk, "name": "e1", "protocol": "file", "base_url": base_url}
    answer = api.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 400, answer.json()
    assert "base_url" in answer.json()
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize("base_url", [*OUTSIDE_ROOTS, "DATA/../escape/"])
def test_the_endpoint_form_refuses_a_file_base_url_outside_the_file_roots(
    file_root: str, base_url: str
) -> None:
    form = _form("file", base_url.replace("DATA", f"file://{file_root}"))
    assert not form.is_valid()
    assert "base_url" in form.errors


def test_a_file_base_url_inside_the_file_roots_is_accepted(api: APIClient, file_root: str) -> None:
    for name, base_url in [("e1", f"file://{file_root}"), ("e2", f"file://{file_root}/sub/")]:
        body = {"site": own_site().pk, "name": name, "protocol": "file", "base_url": base_url}
        answer = api.post("/api/v1/endpoints/", body, format="json")
        assert answer.status_code == 201, answer.json()
    assert _form("file", f"file://{file_root}/", name="e3").is_valid()


def test_a_stored_file_endpoint_outside_the_file_roots_fails_its_run_as_egress(
    file_root: str,
) -> None:
    # Stored before endpoints were checked when written (the factory does not validate).
    endpoint = EndpointFactory(protocol="file", base_url="file:///etc/")
    run = RunFactory(test_file=TestFileFactory(endpoint=endpoint, path="hostname"))
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert [error["class"] for error in run.errors] == ["egress"]
    assert "outside the allowed file roots" in run.errors[0]["message"]
