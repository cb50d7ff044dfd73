from django.apps import AppConfig


class AdviceConfig(AppConfig):
    """What users should do, per endpoint and site: statements computed from the runs."""

    name = "webapp.advice"
    label = "advice"
    default_auto_field = "django.db.models.BigAutoField"
