from django.contrib import admin

from webapp.campaigns.models import Campaign, ClientAttempt, Run


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
