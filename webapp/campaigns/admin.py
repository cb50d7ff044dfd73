from django.contrib import admin
from django.http import HttpRequest

from webapp.campaigns.models import Campaign, ClientAttempt, Run, ScheduledLaunch
from webapp.campaigns.traces import Trace


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Read-only: a trace is uploaded checked (the Traces page, the API), never edited."""

    list_display = ["name", "owner", "operations", "bytes_read", "created_at"]
    search_fields = ["name", "sha256"]
    exclude = ["text"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "owner", "created_at"]
    search_fields = ["name"]


class ClientAttemptInline(admin.TabularInline):  # type: ignore[type-arg]
    model = ClientAttempt
    extra = 0
    readonly_fields = ["client", "status", "heartbeat_at", "error_class", "bytes_read"]
    exclude = ["record", "error_message", "finished_at"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "id",
        "campaign",
        "endpoint",
        "vantage_point",
        "method",
        "pattern",
        "read_size",
        "clients",
        "status",
        "created_at",
        "throughput_mbps",
    ]
    list_filter = ["status", "method", "pattern", "vantage_point"]
    inlines = [ClientAttemptInline]


@admin.register(ScheduledLaunch)
class ScheduledLaunchAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["campaign", "slot", "launched_at", "run_count", "error"]
    list_filter = ["campaign"]
    readonly_fields = ["campaign", "slot", "launched_at", "run_count", "error"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # slots are claimed by the schedule only; deleting one frees it
