from django.urls import path

from webapp.campaigns import views

app_name = "campaigns"

urlpatterns = [
    path("campaigns/", views.CampaignListView.as_view(), name="campaign-list"),
    path("runs/", views.RunListView.as_view(), name="run-list"),
]
