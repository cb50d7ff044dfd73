"""The campaign results page (/campaigns/{id}/results/) and its API view
(/api/v1/campaigns/{id}/results/): both read webapp.dashboards.results."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views import View
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsOperatorOrReadOnly
from webapp.campaigns.models import Campaign
from webapp.campaigns.validation import (
    FRACTION_ERROR,
    MAX_ID,
    METHODS,
    PATTERNS,
    fraction_in_bounds,
)
from webapp.core.views import ViewerRequiredMixin
from webapp.dashboards.results import ResultsFilter, campaign_results
from workers.engine.params import MAX_CLIENTS, MAX_READ_SIZE

MAX_VALUES = 100  # values per query parameter


def _fraction(value: float) -> None:
    if not fraction_in_bounds(value):
        raise serializers.ValidationError(FRACTION_ERROR)


def _values(child: serializers.Field[Any, Any, Any, Any], help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=child, required=False, max_length=MAX_VALUES, help_text=help_text
    )


class ResultsQuery(serializers.Serializer[Any]):
    """The runs to read; each parameter may repeat (?method=direct&method=copy)."""

    endpoint = _values(serializers.IntegerField(min_value=1, max_value=MAX_ID), "endpoint ids")
    vantage_point = _values(serializers.CharField(max_length=50), "vantage point names")
    method = _values(serializers.ChoiceField(choices=METHODS), "access methods")
    pattern = _values(serializers.ChoiceField(choices=PATTERNS), "read patterns")
    read_size = _values(
        serializers.IntegerField(min_value=1, max_value=MAX_READ_SIZE), "read sizes in bytes"
    )
    fraction = _values(
        serializers.FloatField(validators=[_fraction]), "fractions of the file, in (0, 1]"
    )
    clients = _values(serializers.IntegerField(min_value=1, max_value=MAX_CLIENTS), "clients")
    since = serializers.DateField(required=False, help_text="runs created on or after this day")
    until = serializers.DateField(required=False, help_text="runs created on or before this day")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        since, until = attrs.get("since"), attrs.get("until")
        if since and until and until < since:
            raise serializers.ValidationError({"until": "must not be before since"})
        return attrs


def results_filter(query: QueryDict) -> ResultsFilter:
    """The filter a query string asks for; ValidationError naming the field if it is bad."""
    parsed = ResultsQuery(data=query)
    parsed.is_valid(raise_exception=True)
    return ResultsFilter(**parsed.validated_data)


class CampaignResultsPageView(ViewerRequiredMixin, View):
    """The papers' figures from one campaign. The query string holds the page's controls
    (the parameter a chart is not drawn across, and the days read), so it is a permalink;
    the charts read one selection of the data, the days choose which runs are read."""

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        errors: dict[str, Any] = {}
        try:
            chosen = results_filter(request.GET)
        except ValidationError as exc:
            chosen = ResultsFilter()
            errors = exc.detail if isinstance(exc.detail, dict) else {"query": exc.detail}
        days = ResultsFilter(since=chosen.since, until=chosen.until)
        results = campaign_results(campaign=campaign, filters=days)
        context = {
            "campaign": campaign,
            "results": results,
            "data": results.to_json(),
            "page": {
                "api_url": reverse("campaign-results-api", args=[campaign.pk]),
                "runs_url": f"{reverse('campaigns:run-list')}?campaign={campaign.pk}",
            },
            "query_errors": [(name, _messages(msgs)) for name, msgs in errors.items()],
            "since": chosen.since.isoformat() if chosen.since else "",
            "until": chosen.until.isoformat() if chosen.until else "",
        }
        status = 400 if errors else 200
        return render(request, "dashboards/campaign_results.html", context, status=status)


def _messages(detail: Any) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"value {k}: {_messages(v)}" for k, v in detail.items())
    if isinstance(detail, list):
        return " ".join(_messages(d) for d in detail)
    return str(detail)


# The API's answer, for the OpenAPI schema.
class ResultsCampaign(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ResultsDimensions(serializers.Serializer[Any]):
    """The values each parameter takes in the runs read."""

    endpoint = serializers.ListField(child=serializers.IntegerField())
    vantage_point = serializers.ListField(child=serializers.CharField())
    method = serializers.ListField(child=serializers.CharField())
    pattern = serializers.ListField(child=serializers.CharField())
    read_size = serializers.ListField(child=serializers.IntegerField())
    fraction = serializers.ListField(child=serializers.FloatField())
    clients = serializers.ListField(child=serializers.IntegerField())
    files = serializers.ListField(child=serializers.IntegerField())
    depth = serializers.ListField(child=serializers.IntegerField())
    vector_size = serializers.ListField(child=serializers.IntegerField())
    skip = serializers.ListField(child=serializers.IntegerField())
    readahead = serializers.ListField(child=serializers.IntegerField())
    streams = serializers.ListField(child=serializers.IntegerField())


class ResultsEndpoint(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    site = serializers.CharField()
    protocol = serializers.CharField()
    role = serializers.CharField()


class ResultsParameterSet(serializers.Serializer[Any]):
    """A parameter set's endpoint, vantage point and parameters."""

    endpoint = serializers.IntegerField()
    vantage_point = serializers.CharField()
    pattern = serializers.CharField()
    read_size = serializers.IntegerField()
    clients = serializers.IntegerField()
    files = serializers.IntegerField()
    depth = serializers.IntegerField()
    vector_size = serializers.IntegerField()
    skip = serializers.IntegerField()
    readahead = serializers.IntegerField()
    streams = serializers.IntegerField()


class ResultsCell(ResultsParameterSet):
    """Medians over the repetitions of one parameter set (succeeded and partial runs)."""

    method = serializers.CharField()
    fraction = serializers.FloatField()
    runs = serializers.IntegerField(help_text="measured runs")
    wall_s = serializers.FloatField(allow_null=True)
    open_s = serializers.FloatField(allow_null=True)
    ttfb_s = serializers.FloatField(allow_null=True)
    throughput_mbps = serializers.FloatField(allow_null=True, help_text="aggregate, MB/s")
    client_throughput_mbps = serializers.FloatField(allow_null=True, help_text="per client")
    bytes_requested = serializers.IntegerField(allow_null=True)
    bytes_read = serializers.IntegerField(allow_null=True)
    bytes_wire = serializers.IntegerField(allow_null=True)
    preflight_rtt_ms = serializers.FloatField(
        allow_null=True, help_text="the round-trip time each run's preflight measured"
    )
    wall_s_p25 = serializers.FloatField(allow_null=True)
    wall_s_p75 = serializers.FloatField(allow_null=True)


class ResultsCrossover(ResultsParameterSet):
    """Where copying first becomes faster than reading directly, for one parameter set."""

    crossover_fraction = serializers.FloatField(allow_null=True)
    kind = serializers.ChoiceField(
        choices=["crossover", "copy-faster", "direct-faster", "no-difference", "too-few-fractions"]
    )
    text = serializers.CharField()
    crossings = serializers.IntegerField()


class ResultsFailure(serializers.Serializer[Any]):
    """Final runs that did not fully succeed, by where, method, status and first error."""

    endpoint = serializers.IntegerField()
    vantage_point = serializers.CharField()
    method = serializers.CharField()
    status = serializers.CharField()
    error_class = serializers.CharField()
    runs = serializers.IntegerField()
    of_runs = serializers.IntegerField(help_text="final runs of this endpoint and method")


class ResultsGuidance(serializers.Serializer[Any]):
    """What stands instead of the charts drawn across a parameter (what to add, or which
    runs are still to come); null when they can be drawn. `methods`: the crossover of direct
    and copy; `latency`: the latency-hiding chart."""

    fraction = serializers.CharField(allow_null=True)
    read_size = serializers.CharField(allow_null=True)
    clients = serializers.CharField(allow_null=True)
    methods = serializers.CharField(allow_null=True)
    latency = serializers.CharField(allow_null=True)


class ResultsLatencyOrder(serializers.Serializer[Any]):
    """The latency-hiding chart's endpoints in order, from one vantage point."""

    vantage_point = serializers.CharField()
    by = serializers.ChoiceField(choices=["rtt", "direct-ttfb", "name"])
    endpoints = serializers.ListField(child=serializers.IntegerField())
    text = serializers.CharField(help_text="which order it is, in words")


class CampaignResultsSerializer(serializers.Serializer[Any]):
    campaign = ResultsCampaign()
    dimensions = ResultsDimensions()
    varying = serializers.ListField(child=serializers.CharField())
    endpoints = ResultsEndpoint(many=True)
    cells = ResultsCell(many=True)
    crossovers = ResultsCrossover(many=True)
    failures = ResultsFailure(many=True)
    active_runs = serializers.IntegerField(help_text="runs still queued or running")
    guidance = ResultsGuidance()
    latency_order = ResultsLatencyOrder(many=True)


class CampaignResultsAPIView(APIView):
    """The campaign results page's data: medians per parameter set, copy-vs-direct
    crossovers, failures by error class; of the runs the query selects."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        operation_id="campaigns_results",
        parameters=[ResultsQuery],
        responses={
            200: CampaignResultsSerializer,
            400: OpenApiResponse(description="a bad query parameter, named"),
            404: OpenApiResponse(description="no such campaign"),
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        campaign = get_object_or_404(Campaign, pk=pk)
        filters = results_filter(request.query_params)
        return Response(campaign_results(campaign=campaign, filters=filters).to_json())
