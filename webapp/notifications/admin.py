"""The admin shows subscriptions (a user's or a team's) without their webhook URL or secret
(never shown again) and deliveries read-only, failed ones findable by status."""

from django.contrib import admin
from django.http import HttpRequest

from webapp.notifications.models import Delivery, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "id", "owner", "team", "channel", "format", "target", "target_id", "digest", "active",
    ]  # fmt: skip
    list_filter = ["channel", "target", "digest", "active"]
    list_select_related = ["owner", "team"]
    # Changed through subscription_save (the page, the API), which checks the egress policy.
    readonly_fields = [
        "owner", "team", "channel", "format", "target", "target_id", "digest", "email",
    ]  # fmt: skip
    fields = [*readonly_fields, "active"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


_DELIVERY_FIELDS = (
    "subscription",
    "event",
    "digest_day",
    "recipient",
    "status",
    "attempts",
    "created_at",
    "next_attempt_at",
    "lease_until",
    "sent_at",
    "last_error",
)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "id", "status", "subscription", "recipient", "event", "digest_day", "attempts",
        "last_error",
    ]  # fmt: skip
    list_filter = ["status"]
    fields = readonly_fields = _DELIVERY_FIELDS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
