"""Dashboard pages. Each page's module holds its selector, its page view and its API view."""

from django.urls import URLPattern, URLResolver, path

from webapp.dashboards import alerts, matrix
from webapp.dashboards.compare_views import ComparePageView
from webapp.dashboards.results_views import CampaignResultsPageView

app_name = "dashboards"

urlpatterns: list[URLPattern | URLResolver] = [
    path("compare/", ComparePageView.as_view(), name="compare"),
    path("matrix/", matrix.MatrixView.as_view(), name="matrix"),
    path("alerts/", alerts.AlertsView.as_view(), name="alerts"),
    path(
        "campaigns/<int:pk>/results/",
        CampaignResultsPageView.as_view(),
        name="campaign-results",
    ),
]
