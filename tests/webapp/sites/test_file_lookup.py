"""Adding a test file asks the lab's real servers for its size and adler32 (page and API)."""

from __future__ import annotations

import html
import zlib
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from webapp.accounts.services import api_token_create
from webapp.sites.models import Endpoint, Site, TestFile

pytestmark = pytest.mark.django_db

FILE = "/fedprobe/file-4M"


@pytest.fixture
def registered(lab: Any, settings: Any) -> Any:
    """The lab's files as this host's file roots, its CA as this host's CA folder."""
    settings.FEDPROBE_FILE_ROOTS = [str(lab.data_dir("local"))]
    settings.FEDPROBE_CA_DIR = str(lab.ca_dir())
    return lab


def lab_endpoint(lab: Any, name: str, **fields: Any) -> Endpoint:
    """A row of the lab endpoint `name`, without test files (lab_register costs seconds)."""
    known = lab.endpoint(name)
    site, _ = Site.objects.get_or_create(name=f"lab-{known.site}")
    return Endpoint.objects.create(
        site=site, name=name, protocol=known.protocol, base_url=known.url, **fields
    )


def on_disk(lab: Any) -> tuple[int, str]:
    data = (lab.data_dir("local") / FILE.lstrip("/")).read_bytes()
    return len(data), f"{zlib.adler32(data):08x}"


def add(client: Client, endpoint: Endpoint, **fields: str) -> str:
    response = client.post(f"/endpoints/{endpoint.pk}/files/", fields, follow=True)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


@pytest.mark.parametrize(
    ("name", "size_from", "adler32_from"),
    [
        ("local-root", "from XRootD stat", "from XRootD checksum query"),
        ("local-file", "from os.stat", "from reading the file (zlib.adler32)"),
    ],
)
def test_a_blank_size_and_adler32_are_filled_from_the_server(
    registered: Any, admin: Client, name: str, size_from: str, adler32_from: str
) -> None:
    endpoint = lab_endpoint(registered, name)
    page = add(admin, endpoint, path=FILE, size="", adler32="")
    size, adler32 = on_disk(registered)
    added = endpoint.files.get(path=FILE)
    assert (added.size, added.adler32) == (size, adler32)
    assert f"size {size} {size_from}; adler32 {adler32} {adler32_from}" in page


def test_a_server_without_checksums_leaves_adler32_blank_and_says_runs_will_not_verify(
    registered: Any, admin: Client
) -> None:
    endpoint = lab_endpoint(registered, "xcache-root")
    page = add(admin, endpoint, path=FILE)
    added = endpoint.files.get(path=FILE)
    assert (added.size, added.adler32) == (on_disk(registered)[0], "")
    assert "query chksum is not supported" in page
    assert "runs will not verify the bytes" in page


def test_a_missing_file_is_a_size_error_and_adds_nothing(registered: Any, admin: Client) -> None:
    endpoint = lab_endpoint(registered, "local-root")
    page = add(admin, endpoint, path="/fedprobe/no-such-file")
    assert 'id="id_size_error"' in page
    assert "the server did not say (stat failed: [not-found]" in page
    assert not TestFile.objects.exists()


def test_a_typed_adler32_the_server_contradicts_is_an_error(registered: Any, admin: Client) -> None:
    endpoint = lab_endpoint(registered, "near-http")
    page = add(admin, endpoint, path=FILE, size="", adler32="0a1b2c3d")
    assert 'id="id_adler32_error"' in page
    assert f"the server says {on_disk(registered)[1]} (the Digest header of HEAD)" in page
    assert not TestFile.objects.exists()


def test_a_local_path_outside_the_file_roots_is_a_path_error(
    registered: Any, admin: Client, settings: Any
) -> None:
    settings.FEDPROBE_FILE_ROOTS = ["/nowhere"]
    page = add(admin, lab_endpoint(registered, "local-file"), path=FILE)
    assert 'id="id_path_error"' in page
    assert "/nowhere" in page
    assert not TestFile.objects.exists()


def api_admin() -> APIClient:
    user = User.objects.create_user("api-admin")
    user.groups.add(Group.objects.get(name="admin"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def test_the_api_adds_a_file_from_a_token_door_and_says_where_each_value_came_from(
    registered: Any,
) -> None:
    token = registered.mint_token()
    endpoint = lab_endpoint(registered, "local-https", credential_kind="token", credential=token)
    answer = api_admin().post(f"/api/v1/endpoints/{endpoint.pk}/files/", {"path": FILE})
    assert answer.status_code == 201, answer.json()
    size, adler32 = on_disk(registered)
    body = answer.json()
    assert (body["path"], body["size"], body["adler32"]) == (FILE, size, adler32)
    assert body["found"] == {
        "size": {"value": size, "origin": "from the Content-Length of HEAD"},
        "adler32": {"value": adler32, "origin": "from the Digest header of HEAD"},
    }


def test_the_api_refuses_a_file_the_server_does_not_have(registered: Any) -> None:
    endpoint = lab_endpoint(registered, "local-root")
    answer = api_admin().post(
        f"/api/v1/endpoints/{endpoint.pk}/files/", {"path": "/fedprobe/no-such-file"}
    )
    assert answer.status_code == 400
    assert "the server did not say" in answer.json()["size"][0]
    assert not TestFile.objects.exists()
