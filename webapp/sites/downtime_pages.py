"""The downtimes' pages: /downtimes/ (every downtime, filterable, with a form to declare
one), and the POSTs behind the site and endpoint pages' forms (declare, delete)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View

from webapp.accounts.access import OperatorRequiredMixin, ViewerRequiredMixin
from webapp.sites.downtimes import (
    DowntimeFields,
    DowntimeNotAllowed,
    DowntimeRefused,
    downtime_create,
    downtime_delete,
    downtime_editable_by,
    downtime_list,
    downtimes_current_and_upcoming,
)
from webapp.sites.models import Downtime, Endpoint, Site

LIST_LIMIT = 200
DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class DowntimeForm(forms.Form):
    """A downtime to declare: a site or one endpoint, when (UTC) and how bad."""

    site = forms.ModelChoiceField(Site.objects.order_by("name"), required=False)
    endpoint = forms.ModelChoiceField(
        Endpoint.objects.select_related("site").order_by("name"), required=False
    )
    start = forms.DateTimeField(widget=DATETIME_INPUT, help_text="UTC")
    end = forms.DateTimeField(widget=DATETIME_INPUT, help_text="UTC")
    severity = forms.ChoiceField(choices=Downtime.Severity.choices)
    scheduled = forms.BooleanField(required=False, help_text="declared ahead of time")
    description = forms.CharField(required=False, max_length=2000)

    def fields_asked(self) -> DowntimeFields:
        data = self.cleaned_data
        return DowntimeFields(
            site=data["site"],
            endpoint=data["endpoint"],
            start=data["start"],
            end=data["end"],
            severity=data["severity"],
            scheduled=data["scheduled"],
            description=data["description"],
        )


def downtime_form_for(
    *, site: Site | None = None, endpoint: Endpoint | None = None
) -> DowntimeForm:
    """The form a site or endpoint page shows: where is fixed (hidden), it starts now."""
    now = timezone.now().replace(second=0, microsecond=0)
    form = DowntimeForm(
        initial={"site": site, "endpoint": endpoint, "start": now, "severity": "outage"},
        auto_id="downtime_%s",
    )
    form.fields["site"].widget = forms.HiddenInput()
    form.fields["endpoint"].widget = forms.HiddenInput()
    return form


class DowntimeFilter(forms.Form):
    site = forms.ModelChoiceField(Site.objects.order_by("name"), required=False)
    endpoint = forms.ModelChoiceField(Endpoint.objects.order_by("name"), required=False)
    active = forms.NullBooleanField(
        required=False,
        widget=forms.Select(choices=[("", "any"), ("true", "covering now"), ("false", "not now")]),
    )


class DowntimeListView(ViewerRequiredMixin, View):
    template_name = "sites/downtime_list.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        return _list_page(request, DowntimeForm(auto_id="downtime_%s"))


def _list_page(request: HttpRequest, form: DowntimeForm, status: int = 200) -> HttpResponse:
    filters = DowntimeFilter(request.GET)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    now = timezone.now()
    downtimes = downtime_list(
        site=chosen.get("site"),
        endpoint=chosen.get("endpoint"),
        active=chosen.get("active"),
        now=now,
    )
    context = {
        "filters": filters,
        "downtimes": _with_rights(list(downtimes[:LIST_LIMIT]), request),
        "downtime_form": form,
        "now": now,
        "next": request.get_full_path(),
    }
    return render(request, DowntimeListView.template_name, context, status=status)


def _with_rights(downtimes: list[Downtime], request: HttpRequest) -> list[Downtime]:
    for downtime in downtimes:
        downtime.can_delete = downtime_editable_by(downtime, request.user)  # type: ignore[attr-defined]
    return downtimes


def downtimes_for_page(downtimes: list[Downtime], request: HttpRequest) -> list[Downtime]:
    """Downtimes as a site or endpoint page lists them (each knows if the user may delete it)."""
    return _with_rights(downtimes, request)


class DowntimeCreateView(OperatorRequiredMixin, View):
    """GET: the downtimes page with its form to declare one (operators); POST: declare it."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return _list_page(request, DowntimeForm(auto_id="downtime_%s"))

    def post(self, request: HttpRequest) -> HttpResponse:
        form = DowntimeForm(request.POST, auto_id="downtime_%s")
        if form.is_valid():
            try:
                downtime = downtime_create(fields=form.fields_asked(), created_by=request.user)
            except DowntimeRefused as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            except DowntimeNotAllowed as exc:
                raise PermissionDenied(str(exc)) from None
            else:
                messages.success(request, f"Downtime declared: {downtime}.")
                return redirect(_next(request))
        return _list_page(request, form, status=400)


class DowntimeDeleteView(OperatorRequiredMixin, View):
    http_method_names = ["post"]

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        downtime = get_object_or_404(
            Downtime.objects.select_related("site", "endpoint__site"), pk=pk
        )
        try:
            downtime_delete(downtime=downtime, user=request.user)
        except DowntimeNotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        messages.success(request, f"Downtime deleted: {downtime}.")
        return redirect(_next(request))


def _next(request: HttpRequest) -> str:
    wanted = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return wanted if wanted and safe else "/downtimes/"


def page_context(
    request: HttpRequest, *, site: Site | None = None, endpoint: Endpoint | None = None
) -> dict[str, Any]:
    """What a site or endpoint page adds: its current and upcoming downtimes, the form."""
    now = timezone.now()
    found = downtimes_current_and_upcoming(now=now, site=site, endpoint=endpoint)
    where = site if site is not None else endpoint
    assert where is not None
    return {
        "downtimes": downtimes_for_page(found, request),
        "downtime_form": downtime_form_for(site=site, endpoint=endpoint),
        "can_declare": where.editable_by(request.user),
        "now": now,
    }
