"""The compare page (/compare/) and its API view (/api/v1/compare/): one form validates the
query of both, and both call compare.compare_data."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsOperatorOrReadOnly
from webapp.campaigns.selectors import SERIES_METRICS
from webapp.core.views import ViewerRequiredMixin
from webapp.dashboards.compare import (
    BUCKETS,
    DEFAULT_DAYS,
    MAX_DAYS,
    MAX_ENDPOINTS,
    METRIC_LABELS,
    PARAMETER_FIELDS,
    RUNS_MAX_DAYS,
    compare_data,
    default_range,
    endpoints_chosen,
    failure_counts,
)
from webapp.dashboards.form_schema import form_errors
from webapp.dashboards.parameter_sets import FractionField
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.params import MAX_CLIENTS, MAX_READ_SIZE, Method, Pattern

DEFAULT_METRIC = "throughput_mbps"
MOST_MEASURED = "most measured"


class IdsField(forms.Field):
    """A repeated query parameter of ids (endpoint=3&endpoint=7)."""

    widget = forms.SelectMultiple

    def to_python(self, value: Any) -> list[int]:
        ids = []
        for item in value or []:
            text = str(item).strip()
            if not text.isdigit() or len(text) > 18:
                raise ValidationError(f"{item!r} is not an id")
            ids.append(int(text))
        return ids


class CompareForm(forms.Form):
    """What to compare: endpoints (or whole sites, of some protocols), a metric, a parameter
    set (fields left out: the most measured set that agrees) and a range of days."""

    endpoint = IdsField(required=False, help_text="endpoint ids (repeat the parameter)")
    site = IdsField(required=False, help_text="site ids: all their endpoints")
    protocol = forms.MultipleChoiceField(
        choices=Endpoint.Protocol.choices,
        required=False,
        help_text="keep the endpoints of these protocols",
    )
    metric = forms.ChoiceField(
        choices=[(m, f"{METRIC_LABELS[m]} ({unit})") for m, unit in SERIES_METRICS.items()],
        required=False,
    )
    method = forms.ChoiceField(
        choices=[("", MOST_MEASURED)] + [(m.value, m.value) for m in Method], required=False
    )
    pattern = forms.ChoiceField(
        choices=[("", MOST_MEASURED)] + [(p.value, p.value) for p in Pattern], required=False
    )
    read_size = forms.IntegerField(
        min_value=1, max_value=MAX_READ_SIZE, required=False, help_text="bytes"
    )
    fraction = FractionField(required=False, help_text="of the file, in (0, 1]")
    clients = forms.IntegerField(min_value=1, max_value=MAX_CLIENTS, required=False)
    vantage_point = forms.CharField(
        max_length=50, required=False, help_text="a vantage point's name (default: all)"
    )
    server_version = forms.CharField(
        max_length=200,
        required=False,
        help_text="only runs whose server reported this version (or a part of it, e.g. "
        "'XRootD v5.6'); every run shows the version it saw",
    )
    since = forms.DateField(
        required=False, help_text=f"first day (default: {DEFAULT_DAYS} days before until)"
    )
    until = forms.DateField(required=False, help_text="last day, included (default: today, UTC)")
    bucket = forms.ChoiceField(
        choices=[(b, b) for b in BUCKETS], required=False, help_text="default: day"
    )

    def clean_vantage_point(self) -> VantagePoint | None:
        name = self.cleaned_data.get("vantage_point") or ""
        if not name:
            return None
        vantage_point = VantagePoint.objects.filter(name=name).first()
        if vantage_point is None:
            raise ValidationError(f"no vantage point is named {name!r}")
        return vantage_point

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self._clean_range(data)
        if not self.errors:
            self._clean_endpoints(data)
        return data

    def _clean_range(self, data: dict[str, Any]) -> None:
        until = data.get("until") or timezone.now().date()
        since = data.get("since") or default_range(until)[0]
        if since > until:
            self.add_error("since", "must not be after until")
        elif (until - since).days + 1 > MAX_DAYS:
            self.add_error("since", f"the range spans more than {MAX_DAYS} days")
        data.update(since=since, until=until)

    def _clean_endpoints(self, data: dict[str, Any]) -> None:
        endpoint_ids, site_ids = data.get("endpoint") or [], data.get("site") or []
        if not endpoint_ids and not site_ids:
            self.add_error("endpoint", "pick at least one endpoint or site")
            return
        endpoints = list(endpoints_chosen(endpoint_ids=endpoint_ids, site_ids=site_ids))
        unknown = set(endpoint_ids) - {e.pk for e in endpoints}
        if unknown:
            self.add_error("endpoint", f"no endpoint has the id {min(unknown)}")
        missing = set(site_ids) - {e.site_id for e in endpoints}
        if missing:
            self.add_error("site", f"no site with endpoints has the id {min(missing)}")
        protocols = data.get("protocol")
        if protocols:
            endpoints = [e for e in endpoints if e.protocol in protocols]
            if not endpoints and not self.errors:
                self.add_error("protocol", "none of the endpoints chosen speaks these protocols")
        if len(endpoints) > MAX_ENDPOINTS:
            field = "site" if site_ids else "endpoint"
            self.add_error(
                field, f"{len(endpoints)} endpoints: compare at most {MAX_ENDPOINTS} at once"
            )
        data["endpoints"] = endpoints

    def query(self) -> dict[str, Any]:
        """compare_data's arguments (call once the form is valid)."""
        data = self.cleaned_data
        return {
            "endpoints": data["endpoints"],
            "metric": data.get("metric") or DEFAULT_METRIC,
            "since": data["since"],
            "until": data["until"],
            "bucket": data.get("bucket") or "day",
            "parameters": {f: data.get(f) for f in PARAMETER_FIELDS},
            "vantage_point": data.get("vantage_point") or None,
            "server_version": data.get("server_version") or None,
        }


class ComparePageView(ViewerRequiredMixin, View):
    """Compare over time. Without endpoints or sites: the form, and what to do."""

    template_name = "dashboards/compare.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        picked = "endpoint" in request.GET or "site" in request.GET
        form = CompareForm(request.GET if picked else None)
        data = compare_data(**form.query()) if picked and form.is_valid() else None
        context = {
            "form": form,
            "data": data,
            "failures": failure_counts(data["failures"]) if data else {},
            "sites": _sites_with_endpoints(),
            "vantage_points": VantagePoint.objects.order_by("name").values_list("name", flat=True),
            "chosen": _chosen(form, data),
            "runs_max_days": RUNS_MAX_DAYS,
            "max_endpoints": MAX_ENDPOINTS,
        }
        status = 400 if picked and form.errors else 200
        return render(request, self.template_name, context, status=status)


def _sites_with_endpoints() -> list[Site]:
    endpoints = Endpoint.objects.order_by("name").only("pk", "name", "protocol", "site_id")
    return list(
        Site.objects.filter(endpoints__isnull=False)
        .distinct()
        .order_by("name")
        .prefetch_related(Prefetch("endpoints", queryset=endpoints))
    )


def _chosen(form: CompareForm, data: dict[str, Any] | None) -> dict[str, Any]:
    """The controls' values as the page shows them: what was asked, with the range and the
    parameter set the data used filled in."""
    if not form.is_bound:
        since, until = default_range(timezone.now().date())
        return {"metric": DEFAULT_METRIC, "bucket": "day", "since": since, "until": until}
    chosen: dict[str, Any] = {
        "endpoint": set(form.data.getlist("endpoint")),
        "site": set(form.data.getlist("site")),
        "protocol": set(form.data.getlist("protocol")),
        **{
            k: form.data.get(k, "")
            for k in ("metric", "vantage_point", "server_version", "bucket", "since", "until")
        },
        **{f: form.data.get(f, "") for f in PARAMETER_FIELDS},
    }
    if data:
        chosen.update(since=data["since"], until=data["until"])
        chosen.update(data["parameter_set"] or {})
    return chosen


_SCHEMA_TYPES: list[tuple[type[forms.Field], OpenApiTypes]] = [
    (IdsField, OpenApiTypes.INT),
    (forms.FloatField, OpenApiTypes.DOUBLE),  # a subclass of IntegerField: first
    (forms.IntegerField, OpenApiTypes.INT),
    (forms.DateField, OpenApiTypes.DATE),
]


def _schema_parameters(form_class: type[forms.Form]) -> list[OpenApiParameter]:
    """The form's fields as the API's query parameters (the page takes the same)."""
    parameters = []
    for name, field in form_class.base_fields.items():  # type: ignore[attr-defined]
        kind = next((t for cls, t in _SCHEMA_TYPES if isinstance(field, cls)), OpenApiTypes.STR)
        many = isinstance(field, IdsField | forms.MultipleChoiceField)
        enum = None
        if isinstance(field, forms.ChoiceField):
            enum = [str(value) for value, _ in field.choices if value != ""]
        parameters.append(
            OpenApiParameter(
                name,
                kind,
                OpenApiParameter.QUERY,
                description=str(field.help_text or ""),
                enum=enum,
                many=many,
                explode=True if many else None,
            )
        )
    return parameters


class CompareAPIView(APIView):
    """One metric of chosen endpoints over days: per day (or week) the median and quartiles
    of the measured runs of one parameter set, the failures per day and, for ranges up to
    31 days, the runs themselves."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        parameters=_schema_parameters(CompareForm),
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="{field: [why]}")},
    )
    def get(self, request: Request) -> Response:
        form = CompareForm(request.query_params)
        if not form.is_valid():
            return Response(form_errors(form), status=400)
        return Response(compare_data(**form.query()))
