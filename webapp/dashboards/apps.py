from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    """Charts: campaign results, compare over time, the matrix, home and alerts."""

    name = "webapp.dashboards"
    label = "dashboards"
