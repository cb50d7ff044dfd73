"""Login and logout pages."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from webapp.accounts.throttles import LoginRateThrottle


class LoginView(auth_views.LoginView):
    """Django's login page, with login attempts throttled per client address."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = LoginRateThrottle()
        if throttle.allow_request(request, self):
            return super().post(request, *args, **kwargs)
        context = self.get_context_data(form=self.get_form_class()(request), throttled=True)
        response = self.render_to_response(context, status=429)
        wait_s = throttle.wait()
        if wait_s is not None:
            response.headers["Retry-After"] = str(max(1, round(wait_s)))
        return response
