from django.contrib import admin
from django.http import HttpRequest

from webapp.campaigns.models import Campaign, ClientAttempt, Run, ScheduledLaunch


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
