"""Roles from groups, and the DRF permission classes on real views with real users."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from tests.webapp.factories import SiteFactory, VantagePointFactory
from webapp.accounts.roles import (
    ADMIN,
    OPERATOR,
    ROLES,
    VIEWER,
    CanEditObject,
    IsOperatorOrReadOnly,
    IsViewer,
    can_edit,
    can_operate,
    can_view,
    user_role,
)
from webapp.accounts.services import api_token_create, user_set_role
from webapp.sites.models import Site, VantagePoint

pytestmark = pytest.mark.django_db

factory = APIRequestFactory()


def make_user(role: str | None = None, **fields: Any) -> User:
    user = User.objects.create_user(f"user-{User.objects.count()}", **fields)
    if role:
        user_set_role(user=user, role=role)
    return user


def test_migration_creates_the_three_role_groups() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "operator", "admin"}


@pytest.mark.parametrize("role", ROLES)
def test_user_role_is_the_group_the_user_is_in(role: str) -> None:
    assert user_role(make_user(role)) == role


def test_user_in_several_role_groups_has_the_highest() -> None:
    user = make_user()
    user.groups.add(*Group.objects.filter(name__in=[VIEWER, OPERATOR]))
    assert user_role(user) == OPERATOR


def test_superuser_counts_as_admin_without_a_group() -> None:
    assert user_role(make_user(is_superuser=True)) == ADMIN


@pytest.mark.parametrize(
    "user",
    [None, AnonymousUser()],
    ids=["none", "anonymous"],
)
def test_no_role_without_a_user(user: AnonymousUser | None) -> None:
    assert user_role(user) is None
    assert not can_view(user)


def test_user_without_a_role_group_can_do_nothing() -> None:
    user = make_user()
    user.groups.add(Group.objects.create(name="physicists"))
    assert user_role(user) is None
    assert not can_view(user)
    assert not can_operate(user)


def test_inactive_user_loses_its_role() -> None:
    assert user_role(make_user(ADMIN, is_active=False)) is None


@pytest.mark.parametrize(
    ("role", "viewable", "operable"),
    [(VIEWER, True, False), (OPERATOR, True, True), (ADMIN, True, True)],
)
def test_can_view_and_can_operate_follow_the_role(
    role: str, viewable: bool, operable: bool
) -> None:
    user = make_user(role)
    assert (can_view(user), can_operate(user)) == (viewable, operable)


def test_set_role_replaces_the_previous_role() -> None:
    user = make_user(ADMIN)
    user_set_role(user=user, role=VIEWER)
    assert list(user.groups.values_list("name", flat=True)) == [VIEWER]


def test_set_role_refuses_an_unknown_role() -> None:
    with pytest.raises(ValueError, match="unknown role 'boss'"):
        user_set_role(user=make_user(), role="boss")


# -- permission classes on views -------------------------------------------------------------


def view_with(permission: type[BasePermission], obj: object | None = None) -> Any:
    class Probe(APIView):
        permission_classes = (permission,)

        def respond(self, request: Request) -> Response:
            if obj is not None:
                self.check_object_permissions(request, obj)
            return Response({"ok": True})

        get = post = patch = delete = respond

    return Probe.as_view()


def status_of(view: Any, method: str, user: User | None) -> int:
    request = getattr(factory, method)("/probe/")
    if user is not None:
        force_authenticate(request, user=user)
    return int(view(request).status_code)


@pytest.mark.parametrize(
    ("role", "get", "post"),
    [(None, 403, 403), (VIEWER, 200, 403), (OPERATOR, 200, 403), (ADMIN, 200, 403)],
)
def test_is_viewer_lets_every_role_read_and_nobody_write(
    role: str | None, get: int, post: int
) -> None:
    view, user = view_with(IsViewer), make_user(role)
    assert (status_of(view, "get", user), status_of(view, "post", user)) == (get, post)


@pytest.mark.parametrize(
    ("role", "get", "post"),
    [(None, 403, 403), (VIEWER, 200, 403), (OPERATOR, 200, 200), (ADMIN, 200, 200)],
)
def test_operator_or_read_only_lets_operators_and_admins_write(
    role: str | None, get: int, post: int
) -> None:
    view, user = view_with(IsOperatorOrReadOnly), make_user(role)
    assert (status_of(view, "get", user), status_of(view, "post", user)) == (get, post)


def test_anonymous_request_is_refused_as_not_authenticated() -> None:
    view = view_with(IsOperatorOrReadOnly)
    assert status_of(view, "get", None) == 401


def test_default_permissions_keep_anonymous_users_and_viewers_from_writing() -> None:
    class DefaultProbe(APIView):
        def get(self, request: Request) -> Response:
            return Response({})

        post = get

    view, viewer = DefaultProbe.as_view(), make_user(VIEWER)
    assert status_of(view, "get", None) == 401
    assert status_of(view, "get", make_user()) == 403
    assert (status_of(view, "get", viewer), status_of(view, "post", viewer)) == (200, 403)
    assert status_of(view, "post", make_user(OPERATOR)) == 200


def test_api_token_authenticates_its_user() -> None:
    class WhoAmI(APIView):
        def get(self, request: Request) -> Response:
            return Response({"username": request.user.username})

    user = make_user(VIEWER)
    key = api_token_create(user=user)
    response = WhoAmI.as_view()(factory.get("/me/", HTTP_AUTHORIZATION=f"Token {key}"))
    assert (response.status_code, response.data) == (200, {"username": user.username})


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_owner_operator_may_edit_its_object(method: str) -> None:
    owner = make_user(OPERATOR)
    site = SiteFactory(owner=owner)
    assert status_of(view_with(CanEditObject, site), method, owner) == 200


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_other_operator_may_not_edit_an_owned_object(method: str) -> None:
    site = SiteFactory(owner=make_user(OPERATOR))
    assert status_of(view_with(CanEditObject, site), method, make_user(OPERATOR)) == 403


def test_admin_may_edit_any_object() -> None:
    site = SiteFactory(owner=make_user(OPERATOR))
    assert status_of(view_with(CanEditObject, site), "patch", make_user(ADMIN)) == 200


def test_object_whose_owner_is_gone_is_editable_by_admins_only() -> None:
    site: Site = SiteFactory(owner=None)
    assert not can_edit(make_user(OPERATOR), site)
    assert can_edit(make_user(ADMIN), site)


def test_owner_demoted_to_viewer_may_no_longer_edit() -> None:
    owner = make_user(OPERATOR)
    site = SiteFactory(owner=owner)
    user_set_role(user=owner, role=VIEWER)
    assert status_of(view_with(CanEditObject, site), "patch", owner) == 403


def test_any_operator_may_edit_an_object_without_owner_field() -> None:
    vantage_point: VantagePoint = VantagePointFactory()
    assert not hasattr(vantage_point, "owner_id")
    assert status_of(view_with(CanEditObject, vantage_point), "patch", make_user(OPERATOR)) == 200


def test_viewer_reads_but_does_not_edit_an_object() -> None:
    viewer, site = make_user(VIEWER), SiteFactory(owner=None)
    view = view_with(CanEditObject, site)
    assert (status_of(view, "get", viewer), status_of(view, "patch", viewer)) == (200, 403)


def test_operator_may_create_under_can_edit_object() -> None:
    assert status_of(view_with(CanEditObject), "post", make_user(OPERATOR)) == 200
