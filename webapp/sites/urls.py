from django.urls import path

from webapp.sites import downtime_pages, views

app_name = "sites"

urlpatterns = [
    path("downtimes/", downtime_pages.DowntimeListView.as_view(), name="downtime-list"),
    path("downtimes/new/", downtime_pages.DowntimeCreateView.as_view(), name="downtime-create"),
    path(
        "downtimes/<int:pk>/delete/",
        downtime_pages.DowntimeDeleteView.as_view(),
        name="downtime-delete",
    ),
    path("sites/", views.SiteListView.as_view(), name="site-list"),
    path("sites/new/", views.SiteCreateView.as_view(), name="site-create"),
    # sites/<int:pk>/ (site-detail), the site's page, is a dashboard: webapp/dashboards/urls.py
    path("sites/<int:pk>/edit/", views.SiteUpdateView.as_view(), name="site-edit"),
    path("endpoints/new/", views.EndpointCreateView.as_view(), name="endpoint-create"),
    # endpoints/<int:pk>/ (endpoint-detail) and its files/ (endpoint-file-add) are a dashboard
    # (webapp/dashboards/endpoint_pages.py); vantage-points/ (vantage-point-list) shows
    # campaign data: webapp/campaigns/site_pages.py
    path("endpoints/<int:pk>/edit/", views.EndpointUpdateView.as_view(), name="endpoint-edit"),
    path(
        "endpoints/<int:pk>/disable/", views.EndpointDisableView.as_view(), name="endpoint-disable"
    ),
    path("endpoints/<int:pk>/enable/", views.EndpointEnableView.as_view(), name="endpoint-enable"),
    path("endpoints/<int:pk>/test/", views.EndpointTestView.as_view(), name="endpoint-test"),
    path(
        "endpoints/<int:pk>/files/<int:file_pk>/remove/",
        views.EndpointFileRemoveView.as_view(),
        name="endpoint-file-remove",
    ),
    path(
        "vantage-points/new/",
        views.VantagePointCreateView.as_view(),
        name="vantage-point-create",
    ),
    path(
        "vantage-points/<int:pk>/edit/",
        views.VantagePointUpdateView.as_view(),
        name="vantage-point-edit",
    ),
]
