"""Pages for sites, endpoints and vantage points."""

from __future__ import annotations

from django.db.models import QuerySet
from django.views.generic import ListView

from webapp.core.views import ViewerRequiredMixin
from webapp.sites.models import Site, VantagePoint


class SiteListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "sites/site_list.html"
    context_object_name = "sites"

    def get_queryset(self) -> QuerySet[Site]:
        return Site.objects.prefetch_related("endpoints").order_by("name")


class VantagePointListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "sites/vantage_point_list.html"
    context_object_name = "vantage_points"
    queryset = VantagePoint.objects.order_by("name")
