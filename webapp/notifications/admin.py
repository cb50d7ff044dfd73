"""The admin shows subscriptions without their webhook URL or secret (never shown again) and
deliveries read-only, failed ones findable by status."""

from django.contrib import admin
from django.http import HttpRequest

from webapp.notifications.models import Delivery, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["id", "owner", "channel", "format", "target", "target_id", "digest", "active"]
    list_filter = ["channel", "target", "digest", "active"]
    fields = ["owner", "channel", "format", "target", "target_id", "digest", "email", "active"]
    readonly_fields = fields  # changed through subscription_save (the page, the API)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["id", "status", "subscription", "event", "digest_day", "attempts", "last_error"]
    list_filter = ["status"]
    readonly_fields = [
        "subscription",
        "event",
        "digest_day",
        "status",
        "attempts",
        "created_at",
        "next_attempt_at",
        "lease_until",
        "sent_at",
        "last_error",
    ]
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
