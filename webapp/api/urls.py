from django.urls import include, path
from rest_framework.routers import DefaultRouter

from webapp.api import agents, views
from webapp.api.advice import EndpointAdviceAPIView, SiteAdviceAPIView, SuggestedCampaignAPIView
from webapp.api.archivers import ArchiverViewSet
from webapp.api.availability import AvailabilityAPIView
from webapp.api.downtimes import DowntimeViewSet
from webapp.api.regressions import RegressionViewSet
from webapp.api.teams import TeamViewSet
from webapp.api.traces import TraceViewSet
from webapp.dashboards.api import (
    AlertsAPIView,
    CampaignResultsAPIView,
    CompareAPIView,
    MatrixAPIView,
    SiteSummaryAPIView,
    ThresholdAPIView,
    ThresholdListAPIView,
)
from webapp.notifications.api import SubscriptionViewSet

router = DefaultRouter()
router.register("sites", views.SiteViewSet)
router.register("endpoints", views.EndpointViewSet)
router.register("vantage-points", views.VantagePointViewSet)
router.register("campaigns", views.CampaignViewSet)
router.register("runs", views.RunViewSet, basename="run")
router.register("subscriptions", SubscriptionViewSet)
router.register("regressions", RegressionViewSet, basename="regression")
router.register("downtimes", DowntimeViewSet, basename="downtime")
router.register("teams", TeamViewSet, basename="team")
router.register("archivers", ArchiverViewSet, basename="archiver")
router.register("traces", TraceViewSet, basename="trace")

urlpatterns = [
    path("series/", views.SeriesView.as_view(), name="series"),
    path("compare/", CompareAPIView.as_view(), name="compare-api"),
    path("matrix/", MatrixAPIView.as_view(), name="matrix-api"),
    path("matrix/thresholds/", ThresholdListAPIView.as_view(), name="matrix-thresholds-api"),
    path(
        "matrix/thresholds/<str:metric>/",
        ThresholdAPIView.as_view(),
        name="matrix-threshold-api",
    ),
    path("alerts/", AlertsAPIView.as_view(), name="alerts-api"),
    path("availability/", AvailabilityAPIView.as_view(), name="availability-api"),
    path(
        "campaigns/<int:pk>/results/",
        CampaignResultsAPIView.as_view(),
        name="campaign-results-api",
    ),
    path("sites/<int:pk>/summary/", SiteSummaryAPIView.as_view(), name="site-summary-api"),
    path("sites/<int:pk>/advice/", SiteAdviceAPIView.as_view(), name="site-advice-api"),
    path("endpoints/<int:pk>/advice/", EndpointAdviceAPIView.as_view(), name="endpoint-advice-api"),
    path(
        "endpoints/<int:pk>/advice/campaign/",
        SuggestedCampaignAPIView.as_view(),
        name="advice-campaign-api",
    ),
    path("agent/enrol/", agents.EnrolView.as_view(), name="agent-enrol"),
    path("agent/heartbeat/", agents.HeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/runs/<int:pk>/claim/", agents.ClaimView.as_view(), name="agent-claim"),
    path("agent/runs/<int:pk>/progress/", agents.ProgressView.as_view(), name="agent-progress"),
    path("agent/runs/<int:pk>/result/", agents.ResultView.as_view(), name="agent-result"),
    path("agent/runs/<int:pk>/failure/", agents.FailureView.as_view(), name="agent-failure"),
    path("agent/traces/<str:sha256>/", agents.TraceView.as_view(), name="agent-trace"),
    path("agent/cleanups/", agents.CleanupsView.as_view(), name="agent-cleanups"),
    path("agent/runs/<int:pk>/cleanup/", agents.CleanupReportView.as_view(), name="agent-cleanup"),
    path("", include(router.urls)),
]
