"""Roles: viewer (reads), operator (also creates and launches), admin (also edits anything).

A role is membership of the Django group of that name (made by migration 0001). A user
in several role groups has the highest; a superuser is an admin; an inactive or anonymous
user has no role and sees nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AbstractUser, AnonymousUser
from rest_framework.permissions import SAFE_METHODS, BasePermission

if TYPE_CHECKING:  # rest_framework.views imports the default permissions: this module
    from rest_framework.request import Request
    from rest_framework.views import APIView

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)  # lowest first
_NO_OWNER_FIELD = object()

User = AbstractUser | AnonymousUser


def user_role(user: User | None) -> str | None:
    """The user's highest role, or None."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if getattr(user, "is_superuser", False):
        return ADMIN
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    held = [role for role in ROLES if role in names]
    return held[-1] if held else None


def can_view(user: User | None) -> bool:
    return user_role(user) is not None


def can_operate(user: User | None) -> bool:
    return user_role(user) in (OPERATOR, ADMIN)


def is_admin(user: User | None) -> bool:
    return user_role(user) == ADMIN


def can_edit(user: User | None, obj: object) -> bool:
    """Operators edit rows without an owner; rows with an `owner` only their owner or an admin."""
    role = user_role(user)
    if role == ADMIN:
        return True
    if role != OPERATOR or user is None:
        return False
    owner_id = getattr(obj, "owner_id", _NO_OWNER_FIELD)
    if owner_id is _NO_OWNER_FIELD:
        return True
    return owner_id is not None and owner_id == user.pk


class IsViewer(BasePermission):
    """Reads for any role; no writes; nothing for anonymous users."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.method in SAFE_METHODS and can_view(request.user)


class IsOperatorOrReadOnly(BasePermission):
    """Reads for any role; writes (create, launch, cancel...) for operators and admins."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return can_view(request.user)
        return can_operate(request.user)


class CanEditObject(IsOperatorOrReadOnly):
    """As IsOperatorOrReadOnly, and changing one object needs its owner or an admin."""

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        if request.method in SAFE_METHODS:
            return can_view(request.user)
        return can_edit(request.user, obj)
