"""The dashboards' pages. Each validates its query with its form (forms.py), reads its
selector (selectors/) and renders; a bad query is the page again with the form's errors, 400."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Prefetch
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import DetailView, TemplateView

from webapp.accounts.access import ViewerRequiredMixin
from webapp.accounts.roles import can_operate, user_role
from webapp.advice.selectors import site_advice
from webapp.campaigns.estimates import site_schedule_cost
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Campaign, Run
from webapp.dashboards.advice_pages import advice_context
from webapp.dashboards.forms import (
    MOST_MEASURED,
    AlertsForm,
    CompareForm,
    MatrixForm,
    ResultsForm,
    ThresholdForm,
)
from webapp.dashboards.schema import form_errors
from webapp.dashboards.selectors.alerts import MAX_ROWS, alerts_data
from webapp.dashboards.selectors.compare import (
    MAX_ENDPOINTS,
    RUNS_MAX_DAYS,
    CompareData,
    compare_data,
    default_range,
    failure_counts,
)
from webapp.dashboards.selectors.home import (
    TOP,
    home_active_runs,
    home_regressions,
    home_worker_health,
)
from webapp.dashboards.selectors.matrix import DEFAULT_METRIC, matrix_data, matrix_grid
from webapp.dashboards.selectors.parameter_sets import parameter_sets_recent
from webapp.dashboards.selectors.results import ResultsFilter, campaign_results, results_cells
from webapp.dashboards.selectors.results_answer import ANSWER_LINES, results_answer
from webapp.dashboards.selectors.results_guidance import charts_not_drawn
from webapp.dashboards.selectors.site_summary import site_summary
from webapp.dashboards.selectors.thresholds import SAVE_REFUSAL
from webapp.dashboards.services import matrix_threshold_reset, matrix_threshold_save
from webapp.sites.downtime_pages import page_context as downtime_page_context
from webapp.sites.models import Endpoint, Site, VantagePoint
from webapp.watch.availability import site_availability
from webapp.watch.credentials import credentials_expiring
from workers.engine.units import format_size


class MatrixView(ViewerRequiredMixin, View):
    """GET draws the matrix; POST (operators and admins) saves the metric's thresholds for
    everyone, or resets them, and shows the matrix again coloured by them."""

    template_name = "dashboards/matrix.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, ThresholdForm(prefix="thresholds"))

    def post(self, request: HttpRequest) -> HttpResponse:
        if not can_operate(request.user):
            raise PermissionDenied(f"{SAVE_REFUSAL}: you are a {user_role(request.user)}")
        saving = ThresholdForm(request.POST, prefix="thresholds")
        if not saving.is_valid():
            return self._page(request, saving, status=400)
        metric = saving.cleaned_data["metric"]
        if saving.cleaned_data["reset"]:
            matrix_threshold_reset(metric=metric)
        else:
            good, bad = saving.cleaned_data["good"], saving.cleaned_data["bad"]
            matrix_threshold_save(metric=metric, good=good, bad=bad, user=request.user)
        # Back to the same view, coloured by what was saved: the address's boundaries go.
        query = request.GET.copy()
        for name in ("good", "bad"):
            query.pop(name, None)
        query["metric"] = metric
        return redirect(f"{reverse('dashboards:matrix')}?{query.urlencode()}")

    def _page(self, request: HttpRequest, saving: ThresholdForm, status: int = 200) -> HttpResponse:
        recent = parameter_sets_recent()
        form = MatrixForm(request.GET, recent=recent)
        context: dict[str, Any] = {"form": form, "data": None, "saving": saving}
        if not form.is_valid():
            return render(request, self.template_name, context, status=400)
        data = matrix_data(query=form.cleaned_data, recent=recent)
        if not saving.is_bound:
            good, bad = data["thresholds"]["good"], data["thresholds"]["bad"]
            saving.initial = {"metric": data["metric"], "good": f"{good:g}", "bad": f"{bad:g}"}
        context.update(
            data=data,
            grid=matrix_grid(data),
            any_runs=bool(recent),
            can_save=can_operate(request.user),
        )
        return render(request, self.template_name, context, status=status)


# The alerts page lists this many rows of each list, and all (up to MAX_ROWS) with `?all=1`:
# a thousand rows drawn on every visit cost most of the page's time.
PAGE_ROWS = 100


class AlertsView(ViewerRequiredMixin, View):
    template_name = "dashboards/alerts.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        form = AlertsForm(request.GET)
        if not form.is_valid():
            return render(request, self.template_name, {"form": form, "data": None}, status=400)
        every = request.GET.get("all") == "1"
        data = alerts_data(query=form.cleaned_data, limit=MAX_ROWS if every else PAGE_ROWS)
        query = request.GET.copy()
        query["all"] = "1"
        context = {"form": form, "data": data, "every": every, "all_url": f"?{query.urlencode()}"}
        return render(request, self.template_name, context)


class ComparePageView(ViewerRequiredMixin, View):
    """Compare over time. Without endpoints or sites: the form, and what to do."""

    template_name = "dashboards/compare.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        picked = "endpoint" in request.GET or "site" in request.GET
        form = CompareForm(request.GET if picked else None)
        data = compare_data(**form.query()) if picked and form.is_valid() else None
        chosen = _chosen(form, data)
        context = {
            "form": form,
            "data": data,
            "failures": failure_counts(data["failures"]) if data else {},
            "sites": _sites_with_endpoints(),
            "vantage_points": VantagePoint.objects.order_by("name").values_list("name", flat=True),
            "chosen": chosen,
            "read_sizes": _read_sizes(data, chosen),
            "most_measured": MOST_MEASURED,
            "runs_max_days": RUNS_MAX_DAYS,
            "max_endpoints": MAX_ENDPOINTS,
        }
        status = 400 if picked and form.errors else 200
        return render(request, self.template_name, context, status=status)


def _read_sizes(data: CompareData | None, chosen: dict[str, Any]) -> list[tuple[str, str]]:
    """The read size field's choices: the sizes these endpoints measured and the one asked,
    written as sizes ("4 KiB", as the parameter sets are); the address keeps bytes."""
    sizes = {str(s["read_size"]) for s in data["parameter_sets"]} if data else set()
    asked = str(chosen.get("read_size") or "")
    if asked:
        sizes.add(asked)
    ordered = sorted(sizes, key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0, v))
    return [(v, format_size(int(v)) if v.isdigit() else v) for v in ordered]


def _sites_with_endpoints() -> list[Site]:
    endpoints = Endpoint.objects.order_by("name").only("pk", "name", "protocol", "site_id")
    return list(
        Site.objects.filter(endpoints__isnull=False)
        .distinct()
        .order_by("name")
        .prefetch_related(Prefetch("endpoints", queryset=endpoints))
    )


def _chosen(form: CompareForm, data: CompareData | None) -> dict[str, Any]:
    """The controls' values as the page shows them: what was asked, with the range and the
    parameter set the data used filled in."""
    if not form.is_bound:
        since, until = default_range(timezone.now().date())
        return {"metric": DEFAULT_METRIC, "bucket": "day", "since": since, "until": until}
    query = cast(QueryDict, form.data)  # the page's GET query
    chosen: dict[str, Any] = {
        "endpoint": set(query.getlist("endpoint")),
        "site": set(query.getlist("site")),
        "protocol": set(query.getlist("protocol")),
        **{
            k: form.data.get(k, "")
            for k in ("metric", "vantage_point", "server_version", "bucket", "since", "until")
        },
        **{f: form.data.get(f, "") for f in PARAMETER_SET_FIELDS},
    }
    if data:
        chosen.update(since=data["since"], until=data["until"])
        chosen.update(data["parameter_set"] or {})
    return chosen


class HomeView(ViewerRequiredMixin, TemplateView):
    template_name = "dashboards/home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        alerts = alerts_data(query={}, limit=TOP)
        context.update(
            alerts=alerts,
            failing=alerts["failing"][:TOP],
            slower=alerts["slower"][:TOP],
            live={"status_url": reverse("campaigns:run-status")},
            worker_health=home_worker_health(),
            regressions=home_regressions(),
            expiring_credentials=credentials_expiring(now=timezone.now()),
            **home_active_runs(),
        )
        return context


class CampaignResultsPageView(ViewerRequiredMixin, View):
    """The papers' figures from one campaign. The query string holds the page's controls
    (the parameter a chart is not drawn across, and the days read), so it is a permalink;
    the charts read one selection of the data, the days choose which runs are read."""

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        form = ResultsForm(request.GET)
        valid = form.is_valid()
        chosen = form.results_filter() if valid else ResultsFilter()
        days = ResultsFilter(since=chosen.since, until=chosen.until)
        results = campaign_results(campaign=campaign, filters=days)
        errors = {} if valid else form_errors(form)
        context = {
            "campaign": campaign,
            "results": results,
            "data": results.to_json(),
            "page": {
                "api_url": reverse("campaign-results-api", args=[campaign.pk]),
                "runs_url": f"{reverse('campaigns:run-list')}?campaign={campaign.pk}",
            },
            "not_drawn": charts_not_drawn(results.not_asked),
            "answer_url": reverse("dashboards:campaign-results-answer", args=[campaign.pk]),
            "query_errors": [(name, " ".join(messages)) for name, messages in errors.items()],
            "since": chosen.since.isoformat() if chosen.since else "",
            "until": chosen.until.isoformat() if chosen.until else "",
        }
        status = 400 if errors else 200
        return render(request, "dashboards/campaign_results.html", context, status=status)


class CampaignResultsAnswerView(ViewerRequiredMixin, View):
    """The results page's answer in words (a fragment its script fetches): the advice reads
    every run of the campaign, seconds for thousands, so the charts do not wait for it."""

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        lines = results_answer(
            campaign=campaign, cells=results_cells(runs=Run.objects.filter(campaign=campaign))
        )
        context = {
            "answer": lines[:ANSWER_LINES],
            "more": len(lines) - ANSWER_LINES,
            "advice_max_age_days": settings.FEDPROBE_ADVICE_MAX_AGE_DAYS,
        }
        return render(request, "dashboards/results_answer.html", context)


class SiteDetailView(ViewerRequiredMixin, DetailView):  # type: ignore[type-arg]
    """The site's page: its summary (selectors.site_summary), its advice per protocol and
    vantage point (advice_pages.py), then its endpoints."""

    template_name = "sites/site_detail.html"
    context_object_name = "site"
    queryset = Site.objects.select_related("owner")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["endpoints"] = self.object.endpoints.annotate(file_count=Count("files")).order_by(
            "name"
        )
        context["can_edit"] = self.object.editable_by(self.request.user)
        context["summary"] = site_summary(site=self.object)
        context["schedule_cost"] = site_schedule_cost(site_id=self.object.pk)
        context["availability"] = site_availability(site=self.object, now=timezone.now())
        context.update(downtime_page_context(self.request, site=self.object))
        advice = site_advice(self.object)
        api_url = reverse("site-advice-api", args=[self.object.pk])
        context.update(advice_context(self.request, advice, by_protocol=True, api_url=api_url))
        return context
