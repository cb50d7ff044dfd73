from django.urls import path

from webapp.campaigns import site_pages, trace_pages, views

app_name = "campaigns"

urlpatterns = [
    path("campaigns/", views.CampaignListView.as_view(), name="campaign-list"),
    path("campaigns/new/", views.CampaignFormView.as_view(), name="campaign-create"),
    path("campaigns/<int:pk>/", views.CampaignDetailView.as_view(), name="campaign-detail"),
    path("campaigns/<int:pk>/edit/", views.CampaignFormView.as_view(), name="campaign-edit"),
    path("campaigns/<int:pk>/launch/", views.CampaignLaunchView.as_view(), name="campaign-launch"),
    path("campaigns/<int:pk>/cancel/", views.CampaignCancelView.as_view(), name="campaign-cancel"),
    path(
        "campaigns/<int:pk>/pause/",
        views.CampaignSchedulePauseView.as_view(),
        name="campaign-pause",
    ),
    path(
        "campaigns/<int:pk>/resume/",
        views.CampaignSchedulePauseView.as_view(resume=True),
        name="campaign-resume",
    ),
    path("campaigns/<int:pk>/clone/", views.CampaignCloneView.as_view(), name="campaign-clone"),
    path("runs/", views.RunListView.as_view(), name="run-list"),
    path("runs/status/", views.RunStatusView.as_view(), name="run-status"),
    path("runs/<int:pk>/", views.RunDetailView.as_view(), name="run-detail"),
    path("runs/<int:pk>/cancel/", views.RunCancelView.as_view(), name="run-cancel"),
    path("traces/", trace_pages.TraceListView.as_view(), name="trace-list"),
    path("traces/<int:pk>/delete/", trace_pages.TraceDeleteView.as_view(), name="trace-delete"),
]

# The sites app's page that shows campaign data (site_pages.py) keeps its name in the sites
# namespace: webapp/urls.py routes it with the sites app's pages.
sites_pages = [
    path("vantage-points/", site_pages.VantagePointListView.as_view(), name="vantage-point-list"),
]
