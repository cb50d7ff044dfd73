"""Every page needs a login and a role; the health check needs neither."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

from webapp.accounts.access import AdminRequiredMixin, OperatorRequiredMixin
from webapp.accounts.services import user_set_role

pytestmark = pytest.mark.django_db

# Pages outside our own apps: Django's admin has its own login, the API its own auth; the
# icon is for everyone; single sign-on is how anonymous users log in (tests/webapp/accounts);
# /metrics is for scrapers, with a token or from allowed networks (tests/webapp/api); a
# forgotten password is reset without a login (tests/webapp/accounts/test_password_pages.py).
NOT_PAGES = (
    "admin/",
    "api/",
    "accounts/login/",
    "accounts/logout/",
    "accounts/password/reset/",
    "accounts/oidc/",
    "healthz",
    "favicon.ico",
    "metrics",
)
# JSON the pages' scripts poll: login and role as for pages, but no navigation.
PAGE_DATA = ("/runs/status/",)


def _page_paths() -> list[str]:
    """Every page without URL arguments (those with arguments are tested with their views)."""
    paths = []

    def walk(patterns: list[URLPattern | URLResolver], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif "<" not in route and not route.startswith(NOT_PAGES):
                paths.append("/" + route)

    walk(get_resolver().url_patterns, "")
    return sorted(set(paths))


def _operator_only(path: str, mixin: type = OperatorRequiredMixin) -> bool:
    view_class = getattr(resolve(path).func, "view_class", None)
    return view_class is not None and issubclass(view_class, mixin)


def _user(username: str, role: str) -> User:
    user = User.objects.create_user(username)
    user_set_role(user=user, role=role)
    return user


def test_there_are_pages_to_check() -> None:
    assert {"/", "/sites/", "/campaigns/", "/runs/", "/accounts/"} <= set(_page_paths())


@pytest.mark.parametrize("path", _page_paths())
def test_anonymous_users_are_sent_to_log_in(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("path", _page_paths())
def test_a_user_without_a_role_is_forbidden(client: Client, path: str) -> None:
    client.force_login(User.objects.create_user("norole"))
    assert client.get(path).status_code == 403


@pytest.mark.parametrize("path", [p for p in _page_paths() if not _operator_only(p)])
def test_a_viewer_sees_every_page_with_the_navigation(client: Client, path: str) -> None:
    client.force_login(_user("viewer", "viewer"))
    response = client.get(path)
    assert response.status_code == 200
    if path in PAGE_DATA:
        assert response["Content-Type"] == "application/json"
    else:
        assert b'aria-label="Main"' in response.content


@pytest.mark.parametrize("path", [p for p in _page_paths() if _operator_only(p)])
def test_operator_pages_are_forbidden_to_a_viewer_and_shown_to_an_operator(
    client: Client, path: str
) -> None:
    client.force_login(_user("viewer", "viewer"))
    assert client.get(path).status_code == 403
    client.force_login(_user("operator", "operator"))
    if _operator_only(path, AdminRequiredMixin):
        assert client.get(path).status_code == 403
        client.force_login(_user("admin", "admin"))
    response = client.get(path)
    assert response.status_code == 200
    assert b'aria-label="Main"' in response.content


def test_health_check_needs_no_login(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
