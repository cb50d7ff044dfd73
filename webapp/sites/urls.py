from django.urls import path

from webapp.sites import views

app_name = "sites"

urlpatterns = [
    path("sites/", views.SiteListView.as_view(), name="site-list"),
    path("vantage-points/", views.VantagePointListView.as_view(), name="vantage-point-list"),
]
