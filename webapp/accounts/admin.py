"""API tokens in the admin: whose, which (by prefix), when made and last used; never a key.

A key is shown once, when made, on the account page or by `manage.py apitoken`; here a
token can only be revoked (deleted).
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from webapp.accounts.models import ApiToken


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
