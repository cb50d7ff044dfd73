from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Notifications: who is told about regressions (subscriptions), and each message sent."""

    name = "webapp.notifications"
    label = "notifications"
    default_auto_field = "django.db.models.BigAutoField"
