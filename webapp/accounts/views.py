"""Login, logout, the account page, the users page and the teams pages."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.generic import FormView, TemplateView, View

from webapp.accounts.access import AdminRequiredMixin, ViewerRequiredMixin
from webapp.accounts.forms import TeamCreateForm, TeamMemberForm, UserCreateForm
from webapp.accounts.models import Team
from webapp.accounts.oidc import sso_enabled
from webapp.accounts.roles import ROLES, can_operate
from webapp.accounts.selectors import team_list, team_members, teams_of, user_list
from webapp.accounts.services import (
    ApiTokenExists,
    UserInputError,
    api_token_create,
    api_token_exists,
    api_token_revoke,
    api_token_rotate,
    team_create,
    team_delete,
    team_member_add,
    team_member_remove,
    user_change_role,
    user_set_active,
)
from webapp.accounts.throttles import LoginRateThrottle


def _retry_after(response: HttpResponse, throttle: LoginRateThrottle) -> HttpResponse:
    wait_s = throttle.wait()
    if wait_s is not None:
        response.headers["Retry-After"] = str(max(1, round(wait_s)))
    return response


class LoginView(auth_views.LoginView):
    """Django's login page, with login attempts throttled per client address."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_name"] = settings.FEDPROBE_OIDC_NAME if sso_enabled() else None
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = LoginRateThrottle()
        if throttle.allow_page_request(request):
            return super().post(request, *args, **kwargs)
        context = self.get_context_data(form=self.get_form_class()(request), throttled=True)
        return _retry_after(self.render_to_response(context, status=429), throttle)


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's login page, its attempts counted with those of LoginView (same throttle)."""
    if request.method == "POST":
        throttle = LoginRateThrottle()
        if not throttle.allow_page_request(request):
            refused = HttpResponse(
                "Too many login attempts from this address: try again later.",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            return _retry_after(refused, throttle)
    return admin.site.login(request, extra_context)


class AccountView(ViewerRequiredMixin, TemplateView):
    """The user's role, password (a link to change it, or why there is none) and API
    token: create, rotate or revoke it.

    A new token is shown once, in the answer to the POST that made it (never kept in a
    cookie, message or the database, which holds its digest); afterwards only whether one
    exists.
    """

    template_name = "accounts/account.html"
    actions = ("create", "rotate", "revoke")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        user = self.request.user
        assert isinstance(user, User)  # ViewerRequiredMixin let only signed-in users here
        context["has_token"] = api_token_exists(user=user)
        context["has_password"] = user.has_usable_password()
        context["sso_identity"] = user.sso_identities.exists()
        context["sso_name"] = settings.FEDPROBE_OIDC_NAME if sso_enabled() else None
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        action = request.POST.get("action", "")
        if action not in self.actions:
            return HttpResponseBadRequest(f"action: choose one of {', '.join(self.actions)}")
        user = request.user
        assert isinstance(user, User)
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


USERS_REFUSAL = "only admins manage users"


class UserListView(AdminRequiredMixin, TemplateView):
    """Every user with role, active flag, last login and API token; change role, deactivate."""

    refusal = USERS_REFUSAL
    template_name = "accounts/user_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(users=user_list(), roles=ROLES, sso_name=settings.FEDPROBE_OIDC_NAME)
        context["sso_enabled"] = sso_enabled()
        return context


class UserCreateView(AdminRequiredMixin, FormView):  # type: ignore[type-arg]
    refusal = USERS_REFUSAL
    template_name = "accounts/user_form.html"
    form_class = UserCreateForm

    def form_valid(self, form: UserCreateForm) -> HttpResponse:
        user = form.save()
        if user is None:
            return self.form_invalid(form)
        messages.success(self.request, f"User {user.get_username()} was created.")
        return redirect("users")


class UserChangeView(AdminRequiredMixin, View):
    """`POST users/{id}/role/` {role} and `POST users/{id}/active/` {active: 0|1}: the change,
    or the refusal naming its field, as a message on the users page."""

    refusal = USERS_REFUSAL
    change = ""  # "role" or "active"

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        user = get_object_or_404(get_user_model(), pk=pk)
        name = user.get_username()
        try:
            if self.change == "role":
                role = request.POST.get("role", "")
                user_change_role(user=user, role=role)
                done = f"{name} is now {role}."
            else:
                active = request.POST.get("active", "")
                if active not in ("0", "1"):
                    raise UserInputError("active", "give 1 (reactivate) or 0 (deactivate)")
                user_set_active(user=user, active=active == "1")
                done = f"{name} was {'reactivated' if active == '1' else 'deactivated'}."
        except UserInputError as refused:
            messages.error(request, f"{name}: {refused}")
        else:
            messages.success(request, done)
        return redirect("users")


def _signed_in(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # ViewerRequiredMixin let only signed-in users in
    return request.user


class TeamListView(ViewerRequiredMixin, View):
    """Every team with its managers and size, yours marked; operators and admins make one
    (and manage it)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, TeamCreateForm())

    def post(self, request: HttpRequest) -> HttpResponse:
        form = TeamCreateForm(request.POST)
        if form.is_valid():
            try:
                team = team_create(by=_signed_in(request), **form.cleaned_data)
            except UserInputError as refused:
                form.add_error(refused.field, refused.message)
            else:
                messages.success(request, f"Team {team.name} was created: you manage it.")
                return redirect("team", pk=team.pk)
        return self._page(request, form, status=400)

    def _page(self, request: HttpRequest, form: TeamCreateForm, status: int = 200) -> HttpResponse:
        user = _signed_in(request)
        context = {
            "teams": team_list(),
            "mine": set(teams_of(user=user).values_list("pk", flat=True)),
            "form": form if can_operate(user) else None,
            "section": "teams",
        }
        return render(request, "accounts/team_list.html", context, status=status)


class TeamDetailView(ViewerRequiredMixin, View):
    """A team's members; its managers (and admins) add and remove them, or delete the team;
    a member may leave."""

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        team = get_object_or_404(Team, pk=pk)
        return self._page(request, team, TeamMemberForm())

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Add a member (or make one a manager, or no longer one)."""
        team = get_object_or_404(Team, pk=pk)
        form = TeamMemberForm(request.POST)
        if form.is_valid():
            try:
                member = team_member_add(team=team, by=_signed_in(request), **form.cleaned_data)
            except UserInputError as refused:
                form.add_error(refused.field, refused.message)
            else:
                role = "a manager" if member.manager else "a member"
                messages.success(request, f"{member.user.get_username()} is {role} of {team.name}.")
                return redirect("team", pk=team.pk)
        return self._page(request, team, form, status=400)

    def _page(
        self, request: HttpRequest, team: Team, form: TeamMemberForm, status: int = 200
    ) -> HttpResponse:
        context = {
            "team": team,
            "members": team_members(team=team),
            "manages": team.managed_by(_signed_in(request)),
            "form": form,
            "section": "teams",
        }
        return render(request, "accounts/team_detail.html", context, status=status)


class TeamMemberRemoveView(ViewerRequiredMixin, View):
    """`POST teams/{id}/members/{user id}/remove/`: a manager takes a member out, or a member
    leaves; the refusal (the last manager) as a message on the team page."""

    def post(self, request: HttpRequest, pk: int, user_pk: int) -> HttpResponse:
        team = get_object_or_404(Team, pk=pk)
        member = get_object_or_404(get_user_model(), pk=user_pk)
        by = _signed_in(request)
        try:
            team_member_remove(team=team, by=by, user=member)
        except UserInputError as refused:
            messages.error(request, str(refused))
            return redirect("team", pk=team.pk)
        if member.pk == by.pk:
            messages.success(request, f"You left {team.name}.")
            return redirect("teams")
        messages.success(request, f"{member.get_username()} is no longer in {team.name}.")
        return redirect("team", pk=team.pk)


class TeamDeleteView(ViewerRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        team = get_object_or_404(Team, pk=pk)
        team_delete(team=team, by=_signed_in(request))
        messages.success(request, f"Team {team.name} was deleted, with its subscriptions.")
        return redirect("teams")
