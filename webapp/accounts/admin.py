"""API tokens and teams in the admin.

API tokens: whose, which (by prefix), when made and last used; never a key. A key is shown
once, when made, on the account page or by `manage.py apitoken`; here a token can only be
revoked (deleted). Teams: their members and managers, changed in place.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from webapp.accounts.models import ApiToken, Team, TeamMembership


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "prefix", "created", "last_used"]
    fields = ["user", "prefix", "created", "last_used"]
    readonly_fields = ["user", "prefix", "created", "last_used"]
    search_fields = ["user__username", "prefix"]
    list_select_related = ["user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False


class TeamMembershipFormSet(BaseInlineFormSet):  # type: ignore[type-arg]
    """The admin keeps the rule the pages and the API keep (services.team_member_remove): a
    team with members keeps at least one active manager, so that someone besides an admin
    can still change it."""

    def clean(self) -> None:
        super().clean()
        kept = [
            form.cleaned_data
            for form in self.forms
            if form.has_changed() or form.instance.pk is not None
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        members = [row for row in kept if row.get("user") is not None]
        managers = [row for row in members if row.get("manager") and row["user"].is_active]
        if members and not managers:
            raise ValidationError(
                "A team with members needs an active manager: make another member manager "
                "before taking this one's role away or removing them."
            )


class TeamMembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TeamMembership
    formset = TeamMembershipFormSet
    fields = ["user", "manager", "added_at"]
    readonly_fields = ["added_at"]
    autocomplete_fields = ["user"]
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "description", "created_at"]
    search_fields = ["name", "memberships__user__username"]
    fields = ["name", "description", "created_at"]
    readonly_fields = ["created_at"]
    inlines = [TeamMembershipInline]
