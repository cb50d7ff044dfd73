"""/api/v1/teams/: teams and their members, over the services of webapp/accounts/services.py.
Every role reads them; operators and admins create one (and manage it); a team's managers
and admins rename or delete it and add or remove members; any member may leave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.models import Team, TeamMembership
from webapp.accounts.roles import can_view
from webapp.accounts.services import (
    UserInputError,
    team_change,
    team_create,
    team_delete,
    team_member_add,
    team_member_remove,
)
from webapp.core.parsers import PARSER_CLASSES

T = TypeVar("T")
NOT_MANAGER = OpenApiResponse(description="{detail}: only the team's managers or an admin may")
BAD_BODY = OpenApiResponse(description="{field: [message]} naming each bad field")


class TeamMemberSerializer(serializers.ModelSerializer[TeamMembership]):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = TeamMembership
        fields = ["username", "manager", "added_at"]
        read_only_fields = fields


class TeamSerializer(serializers.ModelSerializer[Team]):
    """A team and its members (managers first); `name` is unique, whatever its case."""

    # The name's uniqueness (in any case) is the service's to check: 400 naming `name`.
    name = serializers.CharField(max_length=100)
    members = TeamMemberSerializer(source="memberships", many=True, read_only=True)

    class Meta:
        model = Team
        fields = ["id", "name", "description", "members", "created_at"]
        read_only_fields = ["id", "members", "created_at"]

    def create(self, validated_data: dict[str, Any]) -> Team:
        return _refused_naming_field(
            lambda: team_create(
                name=validated_data["name"],
                description=validated_data.get("description", ""),
                by=self.context["request"].user,
            )
        )

    def update(self, instance: Team, validated_data: dict[str, Any]) -> Team:
        return _refused_naming_field(
            lambda: team_change(
                team=instance,
                by=self.context["request"].user,
                name=validated_data.get("name"),
                description=validated_data.get("description"),
            )
        )


class TeamMemberAddSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150, help_text="the user to add (or change)")
    manager = serializers.BooleanField(
        default=False, help_text="manages the team (a member already in it: made or unmade one)"
    )


def _refused_naming_field(change: Callable[[], T]) -> T:
    try:
        return change()
    except UserInputError as bad:
        raise serializers.ValidationError({bad.field: [bad.message]}) from None


class ReadsForAnyRole(BasePermission):
    """Any role reads; what a write needs (the operator role, a manager of the team) the
    services check, answering 403 with who may."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return can_view(request.user)


def _teams() -> QuerySet[Team]:
    members = TeamMembership.objects.select_related("user").order_by("-manager", "user__username")
    return Team.objects.prefetch_related(Prefetch("memberships", queryset=members))


def _user(request: Request) -> User:
    assert isinstance(request.user, User)  # ReadsForAnyRole let only signed-in users in
    return request.user


_MEMBER_RESPONSES = {
    200: TeamSerializer,
    400: BAD_BODY,
    403: NOT_MANAGER,
    404: OpenApiResponse(description="no such team"),
}


class TeamViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Teams: groups of users who share subscriptions (not roles: those are the users')."""

    serializer_class = TeamSerializer
    permission_classes = [ReadsForAnyRole]
    parser_classes = PARSER_CLASSES
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Team]:
        return _teams()

    def perform_destroy(self, instance: Team) -> None:
        team_delete(team=instance, by=_user(self.request))

    @extend_schema(request=TeamMemberAddSerializer, responses=_MEMBER_RESPONSES)
    @action(detail=True, methods=["post"])
    def members(self, request: Request, pk: str | None = None) -> Response:
        """Add a member (or make one a manager, or no longer one); a manager's or admin's."""
        team = self.get_object()
        given = TeamMemberAddSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        _refused_naming_field(
            lambda: team_member_add(team=team, by=_user(request), **given.validated_data)
        )
        return Response(TeamSerializer(_teams().get(pk=team.pk)).data)

    @extend_schema(request=None, responses=_MEMBER_RESPONSES)
    @action(detail=True, methods=["delete"], url_path=r"members/(?P<username>[^/]+)")
    def member_remove(self, request: Request, username: str, pk: str | None = None) -> Response:
        """Take a member out (a manager's or admin's; any member may remove themselves):
        the team's subscriptions stop reaching them at once. Answers the team."""
        team = self.get_object()
        member = get_object_or_404(get_user_model(), username=username)
        _refused_naming_field(lambda: team_member_remove(team=team, by=_user(request), user=member))
        return Response(TeamSerializer(_teams().get(pk=team.pk)).data, status=status.HTTP_200_OK)
