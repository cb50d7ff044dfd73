from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    """Campaigns (experiments), the runs they expand into and each run's clients."""

    name = "webapp.campaigns"
    label = "campaigns"
    default_auto_field = "django.db.models.BigAutoField"
