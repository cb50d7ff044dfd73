"""The sites app's page that shows campaign data: the vantage point list (each one's worker
health and queued runs).

It lives here, above sites, so that sites imports nothing of campaigns; it keeps its name in
the sites namespace (sites:vantage-point-list): webapp/urls.py routes it with the sites app's
pages. The endpoint page, which shows advice too, is a dashboard
(webapp/dashboards/endpoint_pages.py).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.views.generic import ListView

from webapp.accounts.access import ViewerRequiredMixin
from webapp.campaigns.health import vantage_points_health
from webapp.sites.models import VantagePoint


class VantagePointListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "sites/vantage_point_list.html"
    context_object_name = "vantage_points"
    queryset = VantagePoint.objects.order_by("name")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        vantage_points = list(context["vantage_points"])
        health = vantage_points_health(vantage_points=vantage_points, broker=True)
        for vantage_point in vantage_points:
            vantage_point.health = health[vantage_point.pk]
        context.update(
            vantage_points=vantage_points,
            heartbeat_s=settings.FEDPROBE_WORKER_HEARTBEAT_S,
            stale_after_s=settings.FEDPROBE_WORKER_STALE_S,
        )
        return context
