"""Dashboard pages (views.py); their API views (api.py) are routed in webapp/api/urls.py."""

from django.urls import URLPattern, URLResolver, path

from webapp.dashboards import advice_pages, endpoint_pages, evidence_views, regressions, views

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
        "endpoints/<int:pk>/advice/campaign/",
        advice_pages.SuggestedCampaignCreateView.as_view(),
        name="suggested-campaign-create",
    ),
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

# The site page (its summary, its advice, then its endpoints) and the endpoint page (with its
# advice) keep their names in the sites namespace (sites:site-detail, sites:endpoint-detail,
# sites:endpoint-file-add): webapp/urls.py routes them with the sites app's pages.
site_pages = [
    path("sites/<int:pk>/", views.SiteDetailView.as_view(), name="site-detail"),
    path(
        "endpoints/<int:pk>/",
        endpoint_pages.EndpointDetailView.as_view(),
        name="endpoint-detail",
    ),
    path(
        "endpoints/<int:pk>/files/",
        endpoint_pages.EndpointFileAddView.as_view(),
        name="endpoint-file-add",
    ),
]
