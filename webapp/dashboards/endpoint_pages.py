"""The endpoint's page: its files, recent runs, downtimes and the advice its runs give (an
endpoint-level dashboard); adding a test file re-renders it with the form's errors.

It lives here, above the advice, the campaigns and the sites apps, and keeps its names in
the sites namespace (sites:endpoint-detail, sites:endpoint-file-add): webapp/urls.py routes
it with the sites app's pages.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.generic import DetailView

from webapp.accounts.access import ViewerRequiredMixin
from webapp.advice.selectors import endpoint_advice
from webapp.campaigns.selectors import run_list
from webapp.dashboards.advice_pages import advice_context
from webapp.sites.credentials import credential_summary
from webapp.sites.downtime_pages import page_context as downtime_page_context
from webapp.sites.forms import TestFileForm
from webapp.sites.models import Endpoint
from webapp.sites.services import endpoint_file_add
from webapp.sites.views import EndpointActionView, connection_check_recalled, endpoint_url

RECENT_RUNS = 20


class EndpointDetailView(ViewerRequiredMixin, DetailView):  # type: ignore[type-arg]
    """The endpoint, its advice per vantage point, its test files and recent runs, and this
    session's latest connection test of it."""

    template_name = "sites/endpoint_detail.html"
    context_object_name = "endpoint"
    queryset = Endpoint.objects.select_related("site__owner", "owner")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        endpoint = self.object
        context["files"] = endpoint.files.order_by("path")
        context["runs"] = run_list().filter(endpoint=endpoint)[:RECENT_RUNS]
        context["can_edit"] = endpoint.editable_by(self.request.user)
        context["credential"] = credential_summary(endpoint.credential_info(), now=timezone.now())
        for key, value in connection_check_recalled(self.request, endpoint).items():
            context.setdefault(key, value)
        context.update(downtime_page_context(self.request, endpoint=endpoint))
        advice = endpoint_advice(endpoint)
        api_url = reverse("endpoint-advice-api", args=[endpoint.pk])
        context.update(advice_context(self.request, advice, by_protocol=False, api_url=api_url))
        if context["can_edit"] and "file_form" not in context:
            context["file_form"] = TestFileForm(endpoint=endpoint)
        return context


class EndpointFileAddView(EndpointActionView):
    """Add a test file; a bad one re-renders the endpoint page with the form's errors."""

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        endpoint = self.endpoint(pk)
        form = TestFileForm(request.POST, endpoint=endpoint)
        if not form.is_valid():
            return endpoint_page(request, endpoint, file_form=form)
        test_file = endpoint_file_add(endpoint=endpoint, **form.cleaned_data)
        found = f": {form.fill.summary()}" if form.fill is not None else ""
        messages.success(request, f"Test file {test_file.path} was added{found}.")
        return redirect(endpoint_url(endpoint))


def endpoint_page(request: HttpRequest, endpoint: Endpoint, **extra: Any) -> HttpResponse:
    """The endpoint page as the answer to a POST, with what the POST found."""
    view = EndpointDetailView()
    view.setup(request, pk=endpoint.pk)
    view.object = endpoint
    return view.render_to_response(view.get_context_data(**extra))
