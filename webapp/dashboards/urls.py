"""Dashboard pages. Each page's module holds its selector, its page view and its API view."""

from django.urls import URLPattern, URLResolver, path

from webapp.dashboards.results_views import CampaignResultsPageView

app_name = "dashboards"

urlpatterns: list[URLPattern | URLResolver] = [
    path(
        "campaigns/<int:pk>/results/",
        CampaignResultsPageView.as_view(),
        name="campaign-results",
    ),
]
