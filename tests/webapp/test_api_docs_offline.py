"""The OpenAPI schema and docs pages: for signed-in users only, with no asset from a CDN."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.services import user_set_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_client(client: Client) -> Client:
    user = User.objects.create_user("reader")
    user_set_role(user=user, role="viewer")
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/"])
def test_anonymous_users_get_neither_schema_nor_docs(client: Client, url: str) -> None:
    assert client.get(url).status_code in (401, 403)


def test_viewer_gets_the_schema(viewer_client: Client) -> None:
    response = viewer_client.get("/api/schema/")
    assert response.status_code == 200
    assert b"title: fedprobe API" in response.content


def test_docs_page_loads_its_assets_from_our_static_files(viewer_client: Client) -> None:
    html = viewer_client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets
    assert [url for url in assets if "//" in url] == []
    # Swagger UI's start-up script is the page's own (?script), not inline: see the CSP.
    assert all(url.startswith(("/static/", "/api/docs/?script")) for url in assets), assets
    assert "<script>" not in html
