"""The Django admin lists no API token (issue 10, item 6)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def test_the_admin_has_no_page_listing_api_tokens(client: Client) -> None:
    admin = User.objects.create_superuser("root-admin", password="x")
    key = Token.objects.create(user=User.objects.create_user("someone")).key
    client.force_login(admin)
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404
    index = client.get("/admin/").content.decode()
    assert "authtoken" not in index.lower()
    assert key not in index
