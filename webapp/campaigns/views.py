"""Pages for campaigns and runs."""

from __future__ import annotations

from django.db.models import QuerySet
from django.views.generic import ListView

from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.selectors import run_list
from webapp.core.views import ViewerRequiredMixin


class CampaignListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "campaigns/campaign_list.html"
    context_object_name = "campaigns"
    paginate_by = 50

    def get_queryset(self) -> QuerySet[Campaign]:
        return Campaign.objects.select_related("owner").order_by("-created_at", "-id")


class RunListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "campaigns/run_list.html"
    context_object_name = "runs"
    paginate_by = 50

    def get_queryset(self) -> QuerySet[Run]:
        return run_list()
