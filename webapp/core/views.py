"""Pages every part of the application shares: the health check and the access mixins."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from webapp.accounts.roles import can_operate, can_view, is_admin


@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """For load balancers and compose: 200 when the database answers, else 503. No login."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return JsonResponse({"status": "unavailable", "database": "down"}, status=503)
    return JsonResponse({"status": "ok"})


class ViewerRequiredMixin(AccessMixin):
    """Pages: anonymous users go to the login page; a user without a role gets a 403."""

    def allowed(self, request: HttpRequest) -> bool:
        return can_view(request.user)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not self.allowed(request):
            raise PermissionDenied("your role does not allow this page")
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]


class OperatorRequiredMixin(ViewerRequiredMixin):
    """Pages that create, launch or cancel: operators and admins only."""

    def allowed(self, request: HttpRequest) -> bool:
        return can_operate(request.user)


class AdminRequiredMixin(OperatorRequiredMixin):
    """Pages that change what only admins change (vantage points): 403 with `refusal`."""

    refusal = "only an admin may do this"

    def allowed(self, request: HttpRequest) -> bool:
        if not is_admin(request.user):
            raise PermissionDenied(self.refusal)
        return True
