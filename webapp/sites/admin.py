from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join

from webapp.sites.credentials import credential_summary
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint


class TestFileInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TestFile
    extra = 0


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "tier", "storage_system", "location"]
    search_fields = ["name"]


class EndpointAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    """The endpoint without its credential, which Endpoint.clean still checks against the
    protocol: what it says of the credential is said of the whole form here."""

    class Meta:
        model = Endpoint
        exclude = ["credential", "credential_kind"]

    def add_error(self, field: str | None, error: Any) -> None:
        if field is None and isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            fields: dict[str, list[str]] = {}
            for name, messages in error.message_dict.items():
                if name in self.fields or name == NON_FIELD_ERRORS:
                    fields.setdefault(name, []).extend(messages)
                else:
                    fields.setdefault(NON_FIELD_ERRORS, []).extend(f"{name}: {m}" for m in messages)
            error = ValidationError(fields)
        super().add_error(field, error)


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The credential is never rendered (not even as a form field): change it on the
    endpoint's own page or over the API."""

    form = EndpointAdminForm
    list_display = ["name", "site", "protocol", "role", "base_url", "credential_kind", "enabled"]
    list_filter = ["protocol", "role", "credential_kind", "enabled"]
    search_fields = ["name", "base_url"]
    readonly_fields = ["credential_kind", "credential_info"]
    inlines = [TestFileInline]

    @admin.display(description="Credential")
    def credential_info(self, endpoint: Endpoint) -> str:
        summary = credential_summary(endpoint.credential_info(), now=timezone.now())
        shown = [
            (name, ", ".join(map(str, value)) if isinstance(value, list) else value)
            for name, value in summary.items()
            if name not in ("kind", "expires") and value not in (None, "", [])
        ]
        return format_html_join("; ", "{}: {}", shown) or "-"


@admin.register(VantagePoint)
class VantagePointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The built-in `local` vantage point keeps its name and is never deleted here either."""

    list_display = ["name", "location", "max_parallel_runs"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        return [*fields, "name"] if obj is not None and obj.is_local else fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.delete_refusal():
            return False
        return super().has_delete_permission(request, obj)
