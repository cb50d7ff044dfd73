"""Endpoint pages: disable/enable, the write-only credential, test files."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.webapp.factories import (
    EndpointFactory,
    RunFactory,
    SiteFactory,
    TestFileFactory,
    jwt,
)
from webapp.sites.models import Endpoint, TestFile

pytestmark = pytest.mark.django_db

SECRET = jwt(iss="https://iam.example.org/", sub="probe", scope="storage.read:/", exp=4102444800)
NEW_SECRET = "opaque-bearer-t0ken"


def _edit_form(endpoint: Endpoint, **fields: str) -> dict[str, str]:
    data = {
        "site": str(endpoint.site_id),
        "name": endpoint.name,
        "protocol": endpoint.protocol,
        "base_url": endpoint.base_url,
        "role": endpoint.role,
        "enabled": "on",
        "credential_kind": endpoint.credential_kind,
        "credential": "",
    }
    data.update(fields)
    return data


def _owned_endpoint(client: Client) -> Endpoint:
    """An endpoint on a site the client's user owns (whoever owns the site changes it)."""
    user = client.user  # type: ignore[attr-defined]
    return TestFileFactory(endpoint__owner=user, endpoint__site__owner=user).endpoint


def test_disable_then_enable(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    page = operator.post(f"/endpoints/{endpoint.pk}/disable/", follow=True).content.decode()
    endpoint.refresh_from_db()
    assert endpoint.enabled is False
    assert "is disabled" in page
    assert f'action="/endpoints/{endpoint.pk}/enable/"' in page
    assert "disabled" in operator.get(f"/sites/{endpoint.site_id}/").content.decode()

    operator.post(f"/endpoints/{endpoint.pk}/enable/")
    endpoint.refresh_from_db()
    assert endpoint.enabled is True


def test_disable_and_enable_answer_only_posts(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    assert operator.get(f"/endpoints/{endpoint.pk}/disable/").status_code == 405
    endpoint.refresh_from_db()
    assert endpoint.enabled is True


def test_admin_disables_an_endpoint_it_does_not_own(operator: Client, admin: Client) -> None:
    endpoint = _owned_endpoint(operator)
    assert admin.post(f"/endpoints/{endpoint.pk}/disable/").status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.enabled is False


def test_credential_is_stored_and_never_rendered(operator: Client) -> None:
    site = SiteFactory(owner=operator.user)  # type: ignore[attr-defined]
    data = {
        "site": str(site.pk),
        "name": "tokened",
        "protocol": "https",
        "base_url": "https://127.0.0.1:9/",  # closed: the connection test fails at once
        "role": "data",
        "enabled": "on",
        "credential_kind": "token",
        "credential": SECRET,
    }
    created = operator.post("/endpoints/new/", data, follow=True)
    endpoint = Endpoint.objects.get(name="tokened")
    assert endpoint.credential == SECRET
    # A form re-rendered with an error does not echo the credential that was typed.
    refused = operator.post("/endpoints/new/", {**data, "name": "bad name", "credential": SECRET})
    TestFileFactory(endpoint=endpoint)
    RunFactory(endpoint=endpoint, test_file=endpoint.files.get())
    pages = [
        created,
        refused,
        operator.get(f"/endpoints/{endpoint.pk}/"),
        operator.get(f"/endpoints/{endpoint.pk}/edit/"),
        operator.get(f"/sites/{site.pk}/"),
        operator.get("/sites/"),
        operator.post(f"/endpoints/{endpoint.pk}/test/", follow=True),
    ]
    for response in pages:
        assert response.status_code == 200
        for part in SECRET.split("."):
            assert part not in response.content.decode()
    edit = operator.get(f"/endpoints/{endpoint.pk}/edit/").content.decode()
    assert re.search(r'<textarea name="credential"[^>]*>\s*</textarea>', edit)
    assert "stored encrypted, never shown" in edit


def test_empty_credential_keeps_the_stored_one_and_clear_removes_it(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    endpoint.credential_kind, endpoint.credential = "token", SECRET
    endpoint.save()
    operator.post(f"/endpoints/{endpoint.pk}/edit/", _edit_form(endpoint, role="cache"))
    endpoint.refresh_from_db()
    assert (endpoint.role, endpoint.credential_kind, endpoint.credential) == (
        "cache",
        "token",
        SECRET,
    )

    operator.post(f"/endpoints/{endpoint.pk}/edit/", _edit_form(endpoint, credential=NEW_SECRET))
    endpoint.refresh_from_db()
    assert endpoint.credential == NEW_SECRET

    operator.post(f"/endpoints/{endpoint.pk}/edit/", _edit_form(endpoint, clear_credential="on"))
    endpoint.refresh_from_db()
    assert (endpoint.credential_kind, endpoint.credential) == ("none", "")


def test_a_new_credential_and_clear_together_is_refused(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    endpoint.credential_kind, endpoint.credential = "token", SECRET
    endpoint.save()
    response = operator.post(
        f"/endpoints/{endpoint.pk}/edit/",
        _edit_form(endpoint, credential="other", clear_credential="on"),
    )
    assert 'id="id_credential_error"' in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.credential == SECRET


def test_add_a_test_file_that_becomes_the_default(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    old = endpoint.files.get()
    response = operator.post(
        f"/endpoints/{endpoint.pk}/files/",
        {"path": "/data/big", "size": "1073741824", "adler32": "0a1b2c3d", "is_default": "on"},
        follow=True,
    )
    added = endpoint.files.get(path="/data/big")
    assert (added.size, added.adler32, added.is_default) == (1073741824, "0a1b2c3d", True)
    old.refresh_from_db()
    assert old.is_default is False
    assert endpoint.default_file == added
    text = response.content.decode()
    # Nothing listens at the factory's URL: the typed values are kept, said to be unchecked.
    assert "Test file /data/big was added: size 1073741824 as typed (not checked" in text
    assert "0a1b2c3d" in text
    assert "1073741824" in text


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"path": "/data/x", "size": "10", "adler32": "XYZ"}, "adler32"),
        ({"path": "/data/x", "size": "10", "adler32": "0a1b2c3"}, "adler32"),
        ({"path": "/data/x", "size": "0"}, "size"),
        ({"path": "/data/x", "size": "ten"}, "size"),
        ({"path": "", "size": "10"}, "path"),
        ({"path": "/data/with space", "size": "10"}, "path"),
        ({"path": "/data/taken", "size": "10"}, "path"),
    ],
)
def test_bad_test_file_names_the_field_and_adds_nothing(
    operator: Client, data: dict[str, str], field: str
) -> None:
    endpoint = _owned_endpoint(operator)
    TestFileFactory(endpoint=endpoint, path="/data/taken", is_default=False)
    before = list(TestFile.objects.values())
    response = operator.post(f"/endpoints/{endpoint.pk}/files/", data)
    assert response.status_code == 200
    assert f'id="id_{field}_error"' in response.content.decode()
    assert list(TestFile.objects.values()) == before


def test_remove_a_test_file_unless_runs_read_it(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    kept = endpoint.files.get()
    RunFactory(endpoint=endpoint, test_file=kept)
    spare = TestFileFactory(endpoint=endpoint, path="/data/spare", is_default=False)

    response = operator.post(f"/endpoints/{endpoint.pk}/files/{spare.pk}/remove/", follow=True)
    assert "was removed" in response.content.decode()
    assert not TestFile.objects.filter(pk=spare.pk).exists()

    response = operator.post(f"/endpoints/{endpoint.pk}/files/{kept.pk}/remove/", follow=True)
    assert "runs have read it" in response.content.decode()
    assert TestFile.objects.filter(pk=kept.pk).exists()


def test_a_file_of_another_endpoint_is_not_removed_through_this_one(operator: Client) -> None:
    endpoint = _owned_endpoint(operator)
    elsewhere = TestFileFactory(endpoint=EndpointFactory(owner=operator.user))  # type: ignore[attr-defined]
    response = operator.post(f"/endpoints/{endpoint.pk}/files/{elsewhere.pk}/remove/")
    assert response.status_code == 404
    assert TestFile.objects.filter(pk=elsewhere.pk).exists()


def test_recent_runs_link_to_their_run_pages(viewer: Client) -> None:
    run = RunFactory()
    other = RunFactory()  # of another endpoint: not listed
    text = viewer.get(f"/endpoints/{run.endpoint_id}/").content.decode()
    assert f'href="/runs/{run.pk}/"' in text
    assert f'href="/runs/{other.pk}/"' not in text
