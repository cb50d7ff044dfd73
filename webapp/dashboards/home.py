"""The home page: what is failing now, what got slower, what is running; with links."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.views.generic import TemplateView

from webapp.campaigns.models import Run
from webapp.campaigns.selectors import run_list, runs_progress
from webapp.core.views import ViewerRequiredMixin
from webapp.dashboards.alerts import alerts_data

TOP = 5  # rows of each list on the home page; the alerts page has them all
RUNNING_ROWS = 20
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


class HomeView(ViewerRequiredMixin, TemplateView):
    template_name = "dashboards/home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        alerts = alerts_data(query={})
        active = run_list().filter(status__in=ACTIVE)
        running = list(active[:RUNNING_ROWS])
        progress = {p.id: p for p in runs_progress(run_ids=[run.pk for run in running])}
        context.update(
            alerts=alerts,
            failing=alerts["failing"][:TOP],
            slower=alerts["slower"][:TOP],
            running=[(run, progress.get(run.pk)) for run in running],
            running_total=len(running) if len(running) < RUNNING_ROWS else active.count(),
            live={"status_url": reverse("campaigns:run-status")},
        )
        return context
