"""Every page carries a strict Content-Security-Policy (issue 10, item 12); the pages and
Swagger UI work under it (the browser tests fail on any console error, which is how a
refused script or style shows)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.services import user_set_role

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/", "/campaigns/", "/compare/", "/api/docs/", "/accounts/login/"])
def test_pages_allow_scripts_from_our_own_files_only(client: Client, url: str) -> None:
    user = User.objects.create_user("csp-viewer")
    user_set_role(user=user, role="viewer")
    client.force_login(user)
    policy = client.get(url)["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in directives["default-src"]
