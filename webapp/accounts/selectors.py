"""Reads for the users and teams pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.db.models import Count, Exists, OuterRef, Prefetch, QuerySet

from webapp.accounts.models import ApiToken, SsoIdentity, Team, TeamMembership
from webapp.accounts.roles import ADMIN, ROLES


@dataclass(frozen=True)
class UserRow:
    """One user as the users page lists them."""

    user: AbstractUser
    role: str | None  # held while active: a deactivated user gets it back when reactivated
    has_token: bool
    has_sso: bool

    @property
    def is_active(self) -> bool:
        return self.user.is_active

    @property
    def last_login(self) -> datetime | None:
        return self.user.last_login


def _role(user: AbstractUser) -> str | None:
    if user.is_superuser:
        return ADMIN
    names = {group.name for group in user.groups.all()}
    held = [role for role in ROLES if role in names]
    return held[-1] if held else None


def user_list() -> list[UserRow]:
    """Every user, active ones first, by name; two queries however many users."""
    users = (
        get_user_model()
        .objects.annotate(
            has_token=Exists(ApiToken.objects.filter(user=OuterRef("pk"))),
            has_sso=Exists(SsoIdentity.objects.filter(user=OuterRef("pk"))),
        )
        .prefetch_related("groups")
        .order_by("-is_active", "username")
    )
    return [
        UserRow(user=user, role=_role(user), has_token=user.has_token, has_sso=user.has_sso)
        for user in users
    ]


def team_list() -> QuerySet[Team]:
    """Every team with `member_count` and `manager_names` (a list), by name: two queries."""
    return Team.objects.annotate(member_count=Count("memberships")).prefetch_related(
        Prefetch(
            "memberships",
            queryset=TeamMembership.objects.filter(manager=True).select_related("user"),
            to_attr="manager_memberships",
        )
    )


def team_members(*, team: Team) -> QuerySet[TeamMembership]:
    """The team's memberships with their users, managers first, then by user name."""
    return team.memberships.select_related("user").order_by("-manager", "user__username")


def teams_of(*, user: AbstractUser) -> QuerySet[Team]:
    """The teams `user` is a member of (what is shared with them is theirs)."""
    return Team.objects.filter(memberships__user=user.pk)
