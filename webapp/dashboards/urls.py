"""Dashboard pages (views.py); their API views (api.py) are routed in webapp/api/urls.py."""

from django.urls import URLPattern, URLResolver, path

from webapp.dashboards import evidence_views, regressions, views

app_name = "dashboards"

urlpatterns: list[URLPattern | URLResolver] = [
    path("compare/", views.ComparePageView.as_view(), name="compare"),
    path("matrix/", views.MatrixView.as_view(), name="matrix"),
    path("alerts/", views.AlertsView.as_view(), name="alerts"),
    path("regressions/", regressions.RegressionListView.as_view(), name="regression-list"),
    path(
        "regressions/<int:pk>/",
        regressions.RegressionDetailView.as_view(),
        name="regression-detail",
    ),
    path(
        "regressions/<int:pk>/evidence/",
        evidence_views.RegressionEvidenceView.as_view(),
        name="regression-evidence",
    ),
    path("runs/<int:pk>/evidence/", evidence_views.RunEvidenceView.as_view(), name="run-evidence"),
    path(
        "campaigns/<int:pk>/results/",
        views.CampaignResultsPageView.as_view(),
        name="campaign-results",
    ),
    path(
        "campaigns/<int:pk>/results/answer/",
        views.CampaignResultsAnswerView.as_view(),
        name="campaign-results-answer",
    ),
]

# The site page (its summary, then its endpoints) keeps its name in the sites namespace
# (sites:site-detail): webapp/urls.py routes it with the sites app's pages.
site_page = path("sites/<int:pk>/", views.SiteDetailView.as_view(), name="site-detail")
