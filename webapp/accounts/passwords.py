"""Changing one's password and resetting a forgotten one: Django's views, in the site's pages.

A reset link is mailed through the configured email backend (EMAIL_* settings, as the
notifications are) and points at FEDPROBE_BASE_URL, the address users open the site at (not
the Host header of the request that asked). Users who sign in through the single sign-on
have no password here: the pages say so instead of offering a form they cannot use.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.urls import reverse_lazy

from webapp.accounts.access import ViewerRequiredMixin
from webapp.accounts.oidc import sso_enabled
from webapp.accounts.throttles import LoginRateThrottle


def _sso_name() -> str | None:
    return settings.FEDPROBE_OIDC_NAME if sso_enabled() else None


class PasswordChangeView(ViewerRequiredMixin, auth_views.PasswordChangeView):
    """The signed-in user's password, given the current one; none to change for a user
    without a password (single sign-on, or made with --no-password): the page says why.
    A role is needed, as for the account page that links it."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("account")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        user = self.request.user
        assert isinstance(user, User)  # ViewerRequiredMixin let only signed-in users here
        context["has_password"] = user.has_usable_password()
        context["sso_identity"] = user.sso_identities.exists()
        context["sso_name"] = _sso_name()
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        user = request.user
        if isinstance(user, User) and not user.has_usable_password():
            return self.get(request, *args, **kwargs)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        response = super().form_valid(form)
        messages.success(self.request, "Your password was changed.")
        return response


class PasswordResetView(auth_views.PasswordResetView):
    """Asks for an address and mails a one-time link to each active user with a password
    and that address; whether one exists is not told. Requests are counted with the login
    attempts of the same address (LoginRateThrottle): no mailing someone a hundred links."""

    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"
    success_url = reverse_lazy("password-reset-sent")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "sso_name": _sso_name()}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = LoginRateThrottle()
        if throttle.allow_page_request(request):
            self.extra_email_context = {"base_url": settings.FEDPROBE_BASE_URL}
            return super().post(request, *args, **kwargs)
        context = self.get_context_data(form=self.get_form(), throttled=True)
        return self.render_to_response(context, status=429)


class PasswordResetSentView(auth_views.PasswordResetDoneView):
    template_name = "accounts/password_reset_sent.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        days = settings.PASSWORD_RESET_TIMEOUT // 86400
        return {**super().get_context_data(**kwargs), "sso_name": _sso_name(), "timeout_days": days}


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """The mailed link's page: a new password, once (the token dies with the old one)."""

    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("password-reset-complete")


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "accounts/password_reset_complete.html"
