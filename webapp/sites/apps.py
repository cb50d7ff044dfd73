from django.apps import AppConfig


class SitesConfig(AppConfig):
    """Sites, their endpoints and test files, and the vantage points that measure them."""

    name = "webapp.sites"
    label = "sites"
    default_auto_field = "django.db.models.BigAutoField"
