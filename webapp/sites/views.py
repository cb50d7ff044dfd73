"""Pages for sites, endpoints, their test files and vantage points.

The pages that show data of higher apps - the site and endpoint pages (summary, recent runs,
advice, the test file form's errors: webapp/dashboards/) and the vantage point list (queued
runs: webapp/campaigns/site_pages.py) - are routed in this app's namespace by webapp/urls.py.

Viewers read; operators create sites (and own them); a site and its endpoints are changed,
and endpoints added to it, by its owner or an admin (Site.editable_by, Endpoint.editable_by);
vantage points are an admin's (VantagePoint.editable_by). Checked here on every write and in
the templates for which buttons to show.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.messages.views import SuccessMessageMixin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from django.views.generic import CreateView, ListView, UpdateView, View

from webapp.accounts.access import AdminRequiredMixin, OperatorRequiredMixin, ViewerRequiredMixin
from webapp.sites.credentials import credential_summary
from webapp.sites.forms import EndpointForm, SiteForm, VantagePointForm
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from webapp.sites.services import (
    ConnectionCheck,
    endpoint_file_remove,
    endpoint_set_enabled,
    endpoint_test_connection,
)

SITE_REFUSAL = "only the site's owner or an admin may change it or its endpoints"
VANTAGE_POINT_REFUSAL = "each names the queue that deployed workers consume"


class EditRequiredMixin(OperatorRequiredMixin):
    """Operators only, and the object must be one the user may edit (else 403)."""

    refusal = SITE_REFUSAL

    def get_object(self, queryset: QuerySet[Any] | None = None) -> Any:
        obj = super().get_object(queryset)  # type: ignore[misc]
        if not obj.editable_by(self.request.user):  # type: ignore[attr-defined]
            raise PermissionDenied(self.refusal)
        return obj


class EndpointFormMixin:
    """The endpoint form offers the sites the user may add endpoints to; naming another
    (in the address or the POST) is refused with 403."""

    request: HttpRequest

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        named = request.POST.get("site") or request.GET.get("site") or ""
        known = named.isdigit() and len(named) <= 18  # else not a site: the form says so
        site = Site.objects.filter(pk=int(named)).first() if known else None
        user = request.user
        if site is not None and user.is_authenticated and not site.editable_by(user):
            raise PermissionDenied(f"site {site.name}: {SITE_REFUSAL}")
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc, no-any-return]

    def get_form(self, form_class: Any = None) -> EndpointForm:
        form: EndpointForm = super().get_form(form_class)  # type: ignore[misc]
        form.fields["site"].queryset = Site.objects.editable_by(self.request.user)  # type: ignore[attr-defined]
        return form


class OwnedCreateView(OperatorRequiredMixin, SuccessMessageMixin, CreateView):  # type: ignore[type-arg]
    """Create a row owned by the operator who made it."""

    def form_valid(self, form: ModelForm) -> HttpResponse:  # type: ignore[type-arg]
        form.instance.owner = self.request.user
        return super().form_valid(form)


# Sites


class SiteListView(ViewerRequiredMixin, ListView):  # type: ignore[type-arg]
    template_name = "sites/site_list.html"
    context_object_name = "sites"

    def get_queryset(self) -> QuerySet[Site]:
        return (
            Site.objects.annotate(
                endpoint_count=Count("endpoints"),
                enabled_count=Count("endpoints", filter=Q(endpoints__enabled=True)),
                disabled_count=Count("endpoints", filter=Q(endpoints__enabled=False)),
            )
            .prefetch_related("endpoints")
            .order_by("name")
        )


class SiteCreateView(OwnedCreateView):
    template_name = "sites/site_form.html"
    form_class = SiteForm
    success_message = "Site %(name)s was created."


class SiteUpdateView(EditRequiredMixin, SuccessMessageMixin, UpdateView):  # type: ignore[type-arg]
    template_name = "sites/site_form.html"
    form_class = SiteForm
    model = Site
    success_message = "Site %(name)s was saved."


# Endpoints


# What the endpoint form's POST holds that Django's error reports must not show.
SENSITIVE_FIELDS = sensitive_post_parameters("credential", "oauth_client_secret")


@method_decorator(SENSITIVE_FIELDS, name="dispatch")
class EndpointCreateView(EndpointFormMixin, OwnedCreateView):
    """/endpoints/new/?site=ID starts with that site chosen."""

    template_name = "sites/endpoint_form.html"
    form_class = EndpointForm
    success_message = "Endpoint %(name)s was created."

    def get_initial(self) -> dict[str, Any]:
        initial = super().get_initial()
        site = self.request.GET.get("site", "")
        if site.isdigit():
            initial["site"] = int(site)
        return initial


@method_decorator(SENSITIVE_FIELDS, name="dispatch")
class EndpointUpdateView(EndpointFormMixin, EditRequiredMixin, SuccessMessageMixin, UpdateView):  # type: ignore[type-arg]
    template_name = "sites/endpoint_form.html"
    form_class = EndpointForm
    model = Endpoint
    success_message = "Endpoint %(name)s was saved."

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        # What is stored, not what a refused form put on the instance.
        stored = context["form"].stored_info
        context["stored_credential"] = credential_summary(stored, now=timezone.now())
        return context


class EndpointActionView(OperatorRequiredMixin, View):
    """POST-only actions on one endpoint the user may edit."""

    http_method_names = ["post"]

    def endpoint(self, pk: int) -> Endpoint:
        endpoint = get_object_or_404(Endpoint.objects.select_related("site"), pk=pk)
        if not endpoint.editable_by(self.request.user):
            raise PermissionDenied(SITE_REFUSAL)
        return endpoint


class EndpointEnableView(EndpointActionView):
    enabled = True

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        endpoint = self.endpoint(pk)
        endpoint_set_enabled(endpoint=endpoint, enabled=self.enabled)
        state = "enabled" if self.enabled else "disabled: campaigns launch no runs on it"
        messages.success(request, f"{endpoint} is {state}.")
        return redirect(endpoint_url(endpoint))


class EndpointDisableView(EndpointEnableView):
    enabled = False


class EndpointTestView(OperatorRequiredMixin, View):
    """Test the connection from the web host, then redirect to the endpoint page, which shows
    the outcome (kept in the session: reloading the page shows it again, tests nothing)."""

    http_method_names = ["get", "post"]

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        # An old tab or history entry of this address: the endpoint page, not a 405.
        return redirect("sites:endpoint-detail", pk=pk)

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        endpoint = get_object_or_404(Endpoint.objects.select_related("site__owner", "owner"), pk=pk)
        user = request.user if isinstance(request.user, User) else None
        refusal = endpoint.credential_refusal(user, "testing the connection")
        if refusal:
            raise PermissionDenied(refusal)
        check = endpoint_test_connection(endpoint=endpoint)
        connection_check_remember(request, endpoint, check)
        return redirect(endpoint_url(endpoint))


class EndpointFileRemoveView(EndpointActionView):
    def post(self, request: HttpRequest, pk: int, file_pk: int) -> HttpResponse:
        endpoint = self.endpoint(pk)
        test_file = get_object_or_404(TestFile, pk=file_pk, endpoint=endpoint)
        if endpoint_file_remove(test_file=test_file):
            messages.success(request, f"Test file {test_file.path} was removed.")
        else:
            messages.error(
                request, f"Test file {test_file.path} stays: runs have read it (their record)."
            )
        return redirect(endpoint_url(endpoint))


def endpoint_url(endpoint: Endpoint) -> str:
    return reverse("sites:endpoint-detail", args=[endpoint.pk])


# The latest connection test of each endpoint, per session (the few most recent endpoints).
CHECKS_SESSION_KEY = "connection-checks"
CHECKS_KEPT = 20


def connection_check_remember(
    request: HttpRequest, endpoint: Endpoint, check: ConnectionCheck
) -> None:
    checks = {
        key: value
        for key, value in request.session.get(CHECKS_SESSION_KEY, {}).items()
        if key != str(endpoint.pk)
    }
    checks[str(endpoint.pk)] = {
        "check": asdict(check),
        "at": timezone.now().isoformat(),
        "of": connection_fingerprint(endpoint),
    }
    request.session[CHECKS_SESSION_KEY] = dict(list(checks.items())[-CHECKS_KEPT:])


def connection_check_recalled(request: HttpRequest, endpoint: Endpoint) -> dict[str, Any]:
    """{"check": ConnectionCheck, "checked_at": datetime} of this session's latest test of
    the endpoint, or {}."""
    stored = request.session.get(CHECKS_SESSION_KEY, {}).get(str(endpoint.pk))
    if not stored:
        return {}
    # Only the fields ConnectionCheck has now: a session may outlive a change of it.
    known = {field.name for field in dataclass_fields(ConnectionCheck)}
    values = {key: value for key, value in stored["check"].items() if key in known}
    for key in ("served_by", "warnings"):
        values[key] = tuple(values.get(key, ()))
    return {
        "check": ConnectionCheck(**values),
        "checked_at": datetime.fromisoformat(stored["at"]),
        # Tested before the address or the credential changed: an outcome of another setup.
        "check_stale": stored.get("of", "") != connection_fingerprint(endpoint),
    }


def connection_fingerprint(endpoint: Endpoint) -> str:
    """What a connection test's outcome depends on (the address, the credential and where it
    may go), as a keyed digest: the session holds no secret, and a changed credential shows
    the outcome remembered as stale."""
    tested = [
        endpoint.protocol,
        endpoint.base_url,
        endpoint.credential_kind,
        endpoint.credential,
        endpoint.credential_hosts,
    ]
    return salted_hmac("fedprobe.connection-check", json.dumps(tested)).hexdigest()


# Vantage points


class VantagePointCreateView(AdminRequiredMixin, SuccessMessageMixin, CreateView):  # type: ignore[type-arg]
    refusal = VANTAGE_POINT_REFUSAL
    template_name = "sites/vantage_point_form.html"
    form_class = VantagePointForm
    success_url = reverse_lazy("sites:vantage-point-list")
    success_message = "Vantage point %(name)s was created."


class VantagePointUpdateView(AdminRequiredMixin, SuccessMessageMixin, UpdateView):  # type: ignore[type-arg]
    refusal = VANTAGE_POINT_REFUSAL
    template_name = "sites/vantage_point_form.html"
    form_class = VantagePointForm
    model = VantagePoint
    success_url = reverse_lazy("sites:vantage-point-list")
    success_message = "Vantage point %(name)s was saved."
