"""Who may change what over the API, beyond the roles (webapp.accounts.roles): each rule is
the row's own (`editable_by`, `cancellable_by`), so pages and the API say the same."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.accounts.roles import CanEditObject, IsOperatorOrReadOnly, can_view, is_admin
from webapp.campaigns.models import (
    CAMPAIGN_CANCEL_REFUSAL,
    RUN_CANCEL_REFUSAL,
    SCHEDULE_PAUSE_REFUSAL,
)


class CanEditRow(IsOperatorOrReadOnly):
    """Reads for any role; writes for operators, and changing one row needs its
    `editable_by` (an endpoint: its site's owner or an admin)."""

    message = "only the site's owner or an admin may change this"

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        if request.method in SAFE_METHODS:
            return can_view(request.user)
        return bool(obj.editable_by(request.user))


class IsAdminOrReadOnly(BasePermission):
    """Reads for any role; writes for admins only (vantage points: deploying the workers
    that consume a vantage point's queue is an admin's work)."""

    message = "only an admin may create, change or delete vantage points"

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return can_view(request.user)
        return is_admin(request.user)


class CanCancelRun(IsOperatorOrReadOnly):
    message = RUN_CANCEL_REFUSAL

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return bool(obj.cancellable_by(request.user))


class CanCancelCampaign(IsOperatorOrReadOnly):
    message = CAMPAIGN_CANCEL_REFUSAL

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return bool(obj.cancellable_by(request.user))


class CanPauseSchedule(CanEditObject):
    """A campaign's schedule is paused and resumed by its owner or an admin (roles.can_edit)."""

    message = SCHEDULE_PAUSE_REFUSAL
