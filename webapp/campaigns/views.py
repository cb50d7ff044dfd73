"""Pages for campaigns and runs: thin views over the campaign services and selectors."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import DetailView, ListView, TemplateView

from webapp.accounts.access import OperatorRequiredMixin, ViewerRequiredMixin
from webapp.accounts.roles import can_edit
from webapp.campaigns.estimates import campaign_duration, campaign_eta
from webapp.campaigns.filters import RunFilter, with_first_error
from webapp.campaigns.forms import CampaignForm
from webapp.campaigns.health import vantage_points_health
from webapp.campaigns.models import (
    CAMPAIGN_CANCEL_REFUSAL,
    RUN_CANCEL_REFUSAL,
    SCHEDULE_PAUSE_REFUSAL,
    Campaign,
    Run,
    RunCleanup,
)
from webapp.campaigns.run_detail import run_charts, tpc_progress
from webapp.campaigns.run_table import RunError, run_list_columns
from webapp.campaigns.schedules import (
    ScheduleConflict,
    campaign_schedule_pause,
    campaign_schedule_resume,
    campaign_schedule_state,
)
from webapp.campaigns.selectors import (
    campaign_list,
    campaign_rows,
    campaign_run_summaries,
    run_detail,
    run_list,
    run_trace,
    runs_progress,
)
from webapp.campaigns.services import (
    LaunchWhileActive,
    campaign_cancel,
    campaign_clone,
    campaign_launch,
    campaign_preview,
    run_cancel,
    run_cancel_refusal,
)

MAX_STATUS_IDS = 100
ID = re.compile(r"[0-9]{1,18}")


class CampaignListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "campaigns/campaign_list.html"
    context_object_name = "campaigns"
    paginate_by = 50

    def get_queryset(self) -> QuerySet[Campaign]:
        return campaign_list()

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["rows"] = campaign_rows(list(context["campaigns"]))
        return context


class CampaignDetailView(ViewerRequiredMixin, DetailView):  # type: ignore[type-arg]
    """The experiment: its parameters, rows, matrix, actions and runs."""

    template_name = "campaigns/campaign_detail.html"
    context_object_name = "campaign"
    queryset = Campaign.objects.select_related("owner")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        campaign: Campaign = self.object
        rows = campaign.matrix_rows()
        eta = campaign_eta(campaign=campaign)
        health = vantage_points_health(vantage_points=rows.vantage_points)
        vantage_points = [(vp, health[vp.pk]) for vp in rows.vantage_points]
        context.update(
            rows=rows,
            # Where no worker listens, a launch's runs wait: the page says so before launch.
            vantage_points=vantage_points,
            unheard=[(vp, state) for vp, state in vantage_points if not state.listening],
            endpoints=campaign.endpoints.select_related("site"),
            preview=campaign_preview(campaign=campaign, rows=rows),
            duration=campaign_duration(campaign=campaign, rows=rows),
            # Runs still queued or running: Launch then asks first (CampaignLaunchView).
            eta=eta,
            runs=campaign_run_summaries(campaign_ids=[campaign.pk]).get(campaign.pk),
            recent_runs=run_list().filter(campaign=campaign)[:20],
            runs_url=_runs_url(campaign=campaign.pk),
            can_edit=can_edit(self.request.user, campaign),
            schedule=campaign_schedule_state(campaign=campaign, with_cost=True)
            if campaign.schedule
            else None,
            # The queued or running runs this user may cancel (all for the owner or an admin).
            cancellable_runs=campaign.runs_cancellable_by(self.request.user)
            .filter(status__in=Run.Status.ACTIVE)
            .count(),
        )
        return context


class CampaignFormView(OperatorRequiredMixin, View):
    """Create (no pk) and edit: "Save" validates and saves; "Preview" validates and shows the
    matrix the campaign would launch, saving nothing. Editing a campaign with an owner needs
    its owner or an admin (roles.can_edit)."""

    template_name = "campaigns/campaign_form.html"

    def get(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        campaign = self._campaign(request, pk)
        return self._render(request, CampaignForm(instance=campaign, user=_user(request)), campaign)

    def post(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        campaign = self._campaign(request, pk)
        form = CampaignForm(request.POST, instance=campaign, user=_user(request))
        if not form.is_valid() or "preview" in request.POST:
            return self._render(request, form, campaign)
        if campaign is None:
            form.instance.owner = request.user
        saved = form.save()
        messages.success(request, f"Campaign {saved.name!r} saved.")
        return redirect("campaigns:campaign-detail", pk=saved.pk)

    def _campaign(self, request: HttpRequest, pk: int | None) -> Campaign | None:
        if pk is None:
            return None
        campaign = get_object_or_404(Campaign, pk=pk)
        if not can_edit(request.user, campaign):
            raise PermissionDenied("only its owner or an admin edits this campaign")
        return campaign

    def _render(
        self, request: HttpRequest, form: CampaignForm, campaign: Campaign | None
    ) -> HttpResponse:
        return render(request, self.template_name, {"form": form, "campaign": campaign})


class CampaignLaunchView(OperatorRequiredMixin, View):
    """Launch; while runs of the campaign are still queued or running, ask first (a page
    that says how many, with "Launch again"), as the API answers 409 without ?again=1."""

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        try:
            runs = campaign_launch(
                campaign=campaign,
                trigger=Run.Trigger.MANUAL,
                user=request.user,
                if_idle=request.POST.get("again") != "1",
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                messages.error(request, f"Not launched: {field}: {' '.join(errors)}")
            return redirect("campaigns:campaign-detail", pk=pk)
        except LaunchWhileActive as exc:
            context = {
                "campaign": campaign,
                "active": exc.active,
                "preview": campaign_preview(campaign=campaign),
            }
            return render(request, "campaigns/launch_confirm.html", context)
        messages.success(request, f"{runs_text(len(runs))} queued for {campaign.name!r}.")
        return redirect(_runs_url(campaign=campaign.pk))


class CampaignCancelView(OperatorRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        user = request.user
        if not campaign.cancellable_by(user):
            raise PermissionDenied(CAMPAIGN_CANCEL_REFUSAL)
        done = campaign_cancel(campaign=campaign, runs=campaign.runs_cancellable_by(user))
        if not done.cancelled and not done.stopping:
            messages.info(request, f"{campaign.name!r} has no queued or running run to cancel.")
        else:
            messages.success(
                request,
                f"{runs_text(len(done.cancelled), 'queued')} cancelled, "
                f"{runs_text(len(done.stopping), 'running')} asked to stop.",
            )
        return redirect("campaigns:campaign-detail", pk=pk)


class CampaignSchedulePauseView(OperatorRequiredMixin, View):
    """Pause (or, with `resume`, resume) the campaign's schedule: its owner or an admin."""

    resume = False

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        if not can_edit(request.user, campaign):
            raise PermissionDenied(SCHEDULE_PAUSE_REFUSAL)
        change = campaign_schedule_resume if self.resume else campaign_schedule_pause
        try:
            campaign = change(campaign=campaign)
        except ScheduleConflict as exc:
            messages.info(request, f"{exc}.")
        else:
            messages.success(request, _schedule_message(campaign))
        return redirect("campaigns:campaign-detail", pk=pk)


def _schedule_message(campaign: Campaign) -> str:
    if campaign.schedule_paused:
        return f"Schedule of {campaign.name!r} paused: it launches nothing until resumed."
    following = campaign.schedule_next_slot(timezone.now())
    when = f"{following:%Y-%m-%d %H:%M} UTC" if following else "no slot to come"
    return f"Schedule of {campaign.name!r} resumed: next launch {when}."


class CampaignCloneView(OperatorRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        owner = request.user
        assert isinstance(owner, User)  # OperatorRequiredMixin let only a signed-in user in
        copy = campaign_clone(campaign=campaign, owner=owner)
        messages.success(request, f"Cloned as {copy.name!r}: edit it, then launch it.")
        return redirect("campaigns:campaign-edit", pk=copy.pk)


class RunListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    """Runs filtered and ordered by the API's query parameters (RunFilter), so a page and an
    API call with the same query string list the same runs; an ordering the list does not
    offer is ignored, with a message."""

    template_name = "campaigns/run_list.html"
    context_object_name = "runs"
    paginate_by = 50

    def get_queryset(self) -> QuerySet[Run]:
        self.query = query = self.request.GET.copy()
        query.pop("page", None)
        self.filterset = RunFilter(query or None, queryset=run_list())
        self.ordering_refused = ""
        if self.filterset.is_bound and "ordering" in self.filterset.errors:
            self.ordering_refused = query.pop("ordering", [""])[0]
            self.filterset = RunFilter(query or None, queryset=run_list())
        if self.filterset.is_bound and not self.filterset.is_valid():
            return Run.objects.none()
        return with_first_error(self.filterset.qs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        runs = list(context["runs"])
        active = [run.pk for run in runs if run.status in Run.Status.ACTIVE]
        progress = {p.id: p for p in runs_progress(run_ids=active)}
        form = self.filterset.form
        ordering = form.cleaned_data.get("ordering") if self.filterset.is_bound else None
        # The column headers sort; the filter form keeps the order in a hidden field.
        form.fields.pop("ordering", None)
        context.update(
            filterset=self.filterset,
            rows=[(run, progress.get(run.pk), RunError.of(run)) for run in runs],
            columns=run_list_columns(self.query, ordering[0] if ordering else ""),
            ordering=",".join(ordering or []),
            ordering_refused=self.ordering_refused,
            csv_url=f"{reverse('run-csv')}?{self.query.urlencode()}",
            live={"status_url": reverse("campaigns:run-status")},
        )
        return context


class RunDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "campaigns/run_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        try:
            run = run_detail(kwargs["pk"])
        except Run.DoesNotExist:
            raise Http404("no such run") from None
        (progress,) = runs_progress(run_ids=[run.pk])
        attempts = {a.client: a for a in run.attempts.all()}
        context.update(
            run=run,
            can_cancel=run.cancellable_by(self.request.user),
            progress=progress,
            clients=[(c, attempts.get(c.client)) for c in progress.clients],
            charts=run_charts(run),
            outcome=run.result or {},
            trace=run_trace(run),
            tpc=tpc_progress((run.result or {}).get("tpc")),
            cleanup=RunCleanup.objects.filter(run=run).first(),
            cleanup_max_attempts=settings.FEDPROBE_CLEANUP_MAX_ATTEMPTS,
            live={
                "run": run.pk,
                "final": run.is_final,
                "method": run.method,
                "queue": run.vantage_point.queue,
                "error": run.errors[0] if run.errors else None,
                "status_url": f"{reverse('campaigns:run-status')}?ids={run.pk}&clients=1",
                # Each client's progress is drawn only while the run is running (an ended
                # run's clients are in the charts' data): 256 clients are 20 KB of JSON.
                "progress": progress.to_json(clients=not run.is_final),
            },
        )
        return context


class RunCancelView(OperatorRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        run = get_object_or_404(Run.objects.select_related("campaign"), pk=pk)
        if not run.cancellable_by(request.user):
            raise PermissionDenied(RUN_CANCEL_REFUSAL)
        refusal = run_cancel_refusal(run)
        if refusal:
            messages.error(request, f"Not cancelled: {refusal}.")
            return redirect("campaigns:run-detail", pk=run.pk)
        run = run_cancel(run=run)
        if run.status == Run.Status.CANCELLED:
            messages.success(request, f"Run {run.pk} cancelled.")
        elif run.is_final:
            messages.error(request, f"Not cancelled: run {run.pk} ended meanwhile ({run.status}).")
        else:
            messages.success(request, f"Run {run.pk}: its worker was asked to stop.")
        return redirect("campaigns:run-detail", pk=run.pk)


class RunStatusView(ViewerRequiredMixin, View):
    """JSON for the pages' live status: ?ids=1,2,3 (at most 100) [&clients=1 for each
    client's bytes]. Status and bytes read so far of those planned, per run."""

    def get(self, request: HttpRequest) -> HttpResponse:
        ids = _parse_ids(request.GET.get("ids", ""))
        if ids is None:
            message = f"ids: up to {MAX_STATUS_IDS} run ids separated by commas"
            return JsonResponse({"ids": [message]}, status=400)
        with_clients = request.GET.get("clients") == "1"
        progress = runs_progress(run_ids=ids)
        return JsonResponse({"runs": [p.to_json(clients=with_clients) for p in progress]})


def _parse_ids(text: str) -> list[int] | None:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(parts) > MAX_STATUS_IDS or not all(ID.fullmatch(part) for part in parts):
        return None
    return [int(part) for part in parts]


def runs_text(n: int, kind: str = "") -> str:
    """ "1 run", "2 queued runs": a count of runs in words."""
    return f"{n} {kind + ' ' if kind else ''}run{'' if n == 1 else 's'}"


def _runs_url(**filters: object) -> str:
    return f"{reverse('campaigns:run-list')}?{urlencode(filters)}"


def _user(request: HttpRequest) -> User | None:
    """The signed-in user of a request (the campaign views let only operators in)."""
    return request.user if isinstance(request.user, User) else None
