"""Login, logout and the account page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.models import AbstractUser
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.views.generic import TemplateView

from webapp.accounts.services import (
    ApiTokenExists,
    api_token_create,
    api_token_exists,
    api_token_revoke,
    api_token_rotate,
)
from webapp.accounts.throttles import LoginRateThrottle
from webapp.core.views import ViewerRequiredMixin


def _retry_after(response: HttpResponse, throttle: LoginRateThrottle) -> HttpResponse:
    wait_s = throttle.wait()
    if wait_s is not None:
        response.headers["Retry-After"] = str(max(1, round(wait_s)))
    return response


class LoginView(auth_views.LoginView):
    """Django's login page, with login attempts throttled per client address."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = LoginRateThrottle()
        if throttle.allow_request(request, self):
            return super().post(request, *args, **kwargs)
        context = self.get_context_data(form=self.get_form_class()(request), throttled=True)
        return _retry_after(self.render_to_response(context, status=429), throttle)


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's login page, its attempts counted with those of LoginView (same throttle)."""
    if request.method == "POST":
        throttle = LoginRateThrottle()
        if not throttle.allow_request(request, None):
            refused = HttpResponse(
                "Too many login attempts from this address: try again later.",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            return _retry_after(refused, throttle)
    return admin.site.login(request, extra_context)


class AccountView(ViewerRequiredMixin, TemplateView):
    """The user's role and API token: create, rotate or revoke it.

    A new token is shown once, in the answer to the POST that made it (never kept in a
    cookie, message or the database, which holds its digest); afterwards only whether one
    exists.
    """

    template_name = "accounts/account.html"
    actions = ("create", "rotate", "revoke")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["has_token"] = api_token_exists(user=self.request.user)
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        action = request.POST.get("action", "")
        if action not in self.actions:
            return HttpResponseBadRequest(f"action: choose one of {', '.join(self.actions)}")
        user = request.user
        assert isinstance(user, AbstractUser)
        if action == "revoke":
            api_token_revoke(user=user)
            messages.success(request, "Your API token was revoked: scripts using it stop working.")
            return redirect("account")
        if action == "rotate":
            key = api_token_rotate(user=user)
        else:
            try:
                key = api_token_create(user=user)
            except ApiTokenExists:
                messages.error(request, "You have a token already: replace it to see a new one.")
                return redirect("account")
        return self.render_to_response(self.get_context_data(new_token=key))
