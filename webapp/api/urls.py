from django.urls import include, path
from rest_framework.routers import DefaultRouter

from webapp.api import views

router = DefaultRouter()
router.register("sites", views.SiteViewSet)
router.register("endpoints", views.EndpointViewSet)
router.register("vantage-points", views.VantagePointViewSet)
router.register("campaigns", views.CampaignViewSet)
router.register("runs", views.RunViewSet, basename="run")

urlpatterns = [
    path("series/", views.SeriesView.as_view(), name="series"),
    path("", include(router.urls)),
]
