"""Access to pages by role: the mixins every page view starts with, and the refusal a 403
gives (what the page needs, and what the user is)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from webapp.accounts.roles import (
    ADMIN,
    OPERATOR,
    VIEWER,
    can_operate,
    can_view,
    is_admin,
    user_role,
)

# What each page that needs more than a viewer does, for its refusal: "creating campaigns
# needs the operator role: you are a viewer". Keyed by URL name; other pages say "this page".
ACTIONS = {
    "campaigns:campaign-create": "creating campaigns",
    "campaigns:campaign-edit": "editing campaigns",
    "campaigns:campaign-launch": "launching campaigns",
    "campaigns:campaign-cancel": "cancelling a campaign's runs",
    "campaigns:campaign-clone": "cloning campaigns",
    "campaigns:run-cancel": "cancelling runs",
    "dashboards:suggested-campaign-create": "creating campaigns",
    "sites:site-create": "creating sites",
    "sites:site-edit": "editing sites",
    "sites:endpoint-create": "adding endpoints",
    "sites:endpoint-edit": "editing endpoints",
    "sites:endpoint-disable": "disabling endpoints",
    "sites:endpoint-enable": "enabling endpoints",
    "sites:endpoint-test": "testing an endpoint's connection",
    "sites:endpoint-file-add": "adding test files",
    "sites:endpoint-file-remove": "removing test files",
    "sites:vantage-point-create": "creating vantage points",
    "sites:vantage-point-edit": "editing vantage points",
}
NO_ROLE_REFUSAL = (
    "your account has no role yet: an admin gives it one (viewer, operator or admin) "
    "with manage.py setrole"
)


def role_refusal(request: HttpRequest, needed: str) -> str:
    """Why the user may not do what this page does: what it needs, and what they are."""
    match = request.resolver_match
    action = ACTIONS.get(match.view_name, "this page") if match else "this page"
    held = user_role(request.user)
    if held is None:
        return NO_ROLE_REFUSAL
    article = "an" if held[0] in "aeiou" else "a"
    return f"{action} needs the {needed} role: you are {article} {held}"


class ViewerRequiredMixin(AccessMixin):
    """Pages: anonymous users go to the login page; a user without a role gets a 403 that
    says what the page needs and what the user is."""

    needed_role = VIEWER

    def allowed(self, request: HttpRequest) -> bool:
        return can_view(request.user)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not self.allowed(request):
            raise PermissionDenied(role_refusal(request, self.needed_role))
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc, no-any-return]


class OperatorRequiredMixin(ViewerRequiredMixin):
    """Pages that create, launch or cancel: operators and admins only."""

    needed_role = OPERATOR

    def allowed(self, request: HttpRequest) -> bool:
        return can_operate(request.user)


class AdminRequiredMixin(OperatorRequiredMixin):
    """Pages that change what only admins change (vantage points): 403 with `refusal`
    (what the page needs, and why, when set)."""

    needed_role = ADMIN
    refusal = ""

    def allowed(self, request: HttpRequest) -> bool:
        if not can_view(request.user):
            return False  # no role at all: the refusal says so, without this page's reason
        if not is_admin(request.user):
            reason = role_refusal(request, self.needed_role)
            raise PermissionDenied(f"{reason} ({self.refusal})" if self.refusal else reason)
        return True
