from django.apps import AppConfig


class WatchConfig(AppConfig):
    """The nightly watch: series rolled up per night, regressions found in them, their states."""

    name = "webapp.watch"
    label = "watch"
    default_auto_field = "django.db.models.BigAutoField"
