from django.apps import AppConfig


class WatchConfig(AppConfig):
    """The nightly watch: series rolled up per night, regressions found in them, their states."""

    name = "webapp.watch"
    label = "watch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        from webapp.campaigns.metrics import METRICS

        unknown = [m for m in settings.FEDPROBE_WATCH_METRICS if m not in METRICS]
        if unknown:
            raise ImproperlyConfigured(
                f"FEDPROBE_WATCH_METRICS names no run metric: {', '.join(unknown)} "
                f"(known: {', '.join(METRICS)})"
            )
