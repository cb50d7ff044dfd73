"""The dashboards' API views. Those that read a query validate it with the page's form
(QueryAPIView: 400 {field: [message]} naming each bad parameter, else the selector's data),
so a page and its API accept the same queries and show the same numbers."""

from __future__ import annotations

from typing import Any

from django import forms
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsOperatorOrReadOnly, can_view, user_role
from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import Campaign
from webapp.core.parsers import PARSER_CLASSES
from webapp.dashboards.forms import AlertsForm, CompareForm, MatrixForm, ResultsForm
from webapp.dashboards.schema import form_errors, form_parameters
from webapp.dashboards.selectors.alerts import AlertsData, alerts_data
from webapp.dashboards.selectors.compare import CompareData, compare_data
from webapp.dashboards.selectors.matrix import MatrixData, matrix_data
from webapp.dashboards.selectors.parameter_sets import RecentParameterSet, parameter_sets_recent
from webapp.dashboards.selectors.results import campaign_results
from webapp.dashboards.selectors.site_summary import site_summary
from webapp.dashboards.selectors.thresholds import (
    SAVE_REFUSAL,
    threshold_json,
    thresholds_all,
    thresholds_for,
)
from webapp.dashboards.serializers import (
    CampaignResultsSerializer,
    MatrixThresholdSerializer,
    MatrixThresholdWriteSerializer,
    SiteSummarySerializer,
)
from webapp.dashboards.services import matrix_threshold_reset, matrix_threshold_save
from webapp.sites.models import Site

BAD_QUERY = OpenApiResponse(description="{field: [message]} for each bad parameter")


class QueryAPIView(APIView):
    """GET validates the query with `form_class`: 400 {field: [message]} naming each bad
    parameter, else 200 with `data(form)`."""

    permission_classes = [IsOperatorOrReadOnly]
    form_class: type[forms.Form]

    def query_form(self, request: Request, **kwargs: Any) -> forms.Form:
        return self.form_class(request.query_params)

    def data(self, form: Any) -> Any:
        raise NotImplementedError

    def get(self, request: Request, **kwargs: Any) -> Response:
        form = self.query_form(request, **kwargs)
        if not form.is_valid():
            return Response(form_errors(form), status=400)
        return Response(self.data(form))


@extend_schema_view(
    get=extend_schema(
        parameters=form_parameters(AlertsForm),
        responses={200: OpenApiResponse(description="failing and slower groups"), 400: BAD_QUERY},
    )
)
class AlertsAPIView(QueryAPIView):
    """What is failing now and what got slower (see webapp/dashboards/selectors/alerts.py), at most
    500 rows per list (`failing_total` and `slower_total` count them all)."""

    form_class = AlertsForm

    def data(self, form: AlertsForm) -> AlertsData:
        return alerts_data(query=form.cleaned_data)


@extend_schema_view(
    get=extend_schema(
        parameters=form_parameters(MatrixForm),
        responses={
            200: OpenApiResponse(description="the matrix: axes, cells and thresholds"),
            400: BAD_QUERY,
        },
    )
)
class MatrixAPIView(QueryAPIView):
    """The latest value of a metric per vantage point x endpoint (or site x protocol) for one
    parameter set (default: the most common lately), rated by the good/bad boundaries."""

    form_class = MatrixForm
    recent: list[RecentParameterSet]

    def query_form(self, request: Request, **kwargs: Any) -> MatrixForm:
        self.recent = parameter_sets_recent()
        return MatrixForm(request.query_params, recent=self.recent)

    def data(self, form: MatrixForm) -> MatrixData:
        return matrix_data(query=form.cleaned_data, recent=self.recent)


@extend_schema_view(
    get=extend_schema(
        parameters=form_parameters(CompareForm),
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="{field: [why]}")},
    )
)
class CompareAPIView(QueryAPIView):
    """One metric of chosen endpoints over days: per day (or week) the median and quartiles
    of the measured runs of one parameter set, the failures per day and, for ranges up to
    31 days, the runs themselves."""

    form_class = CompareForm

    def data(self, form: CompareForm) -> CompareData:
        return compare_data(**form.query())


@extend_schema_view(
    get=extend_schema(
        operation_id="campaigns_results",
        parameters=form_parameters(ResultsForm),
        responses={
            200: CampaignResultsSerializer,
            400: OpenApiResponse(description="a bad query parameter, named"),
            404: OpenApiResponse(description="no such campaign"),
        },
    )
)
class CampaignResultsAPIView(QueryAPIView):
    """The campaign results page's data: medians per parameter set, copy-vs-direct
    crossovers, failures by error class; of the runs the query selects."""

    form_class = ResultsForm
    campaign: Campaign

    def query_form(self, request: Request, **kwargs: Any) -> ResultsForm:
        self.campaign = get_object_or_404(Campaign, pk=kwargs["pk"])  # 404 before any 400
        return ResultsForm(request.query_params)

    def data(self, form: ResultsForm) -> dict[str, Any]:
        return campaign_results(campaign=self.campaign, filters=form.results_filter()).to_json()


class SiteSummaryAPIView(APIView):
    """A site's summary (webapp/dashboards/selectors/site_summary.py): per endpoint the latest key
    figures, availability per day and week, the failure rate against the week before; the
    recent failures."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        responses={
            200: SiteSummarySerializer,
            404: OpenApiResponse(description="no such site"),
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        site = get_object_or_404(Site, pk=pk)
        return Response(SiteSummarySerializer(site_summary(site=site)).data)


# /api/v1/matrix/thresholds/ and /api/v1/matrix/thresholds/{metric}/


class CanSaveThresholds(IsOperatorOrReadOnly):
    """Reads for any role; saves for operators and admins, and a viewer is told why."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        allowed = super().has_permission(request, view)
        if not allowed and can_view(request.user):
            self.message = f"{SAVE_REFUSAL}: you are a {user_role(request.user)}"
        return allowed


_WRITE_ANSWERS = {
    200: MatrixThresholdSerializer,
    201: MatrixThresholdSerializer,
    400: OpenApiResponse(description="{field: [message]} for each bad field: nothing saved"),
    403: OpenApiResponse(description="not an operator or admin: nothing saved"),
}
_UNKNOWN = {404: OpenApiResponse(description="unknown metric")}
_METRIC = OpenApiParameter(
    "metric", str, OpenApiParameter.PATH, enum=list(METRICS), description="the metric"
)


class ThresholdListAPIView(APIView):
    """The matrix's thresholds of every metric (saved, else the defaults); POST saves one
    metric's for everyone (201 the first time, 200 when it replaces saved ones)."""

    permission_classes = [CanSaveThresholds]
    parser_classes = PARSER_CLASSES

    @extend_schema(
        summary="every metric's thresholds: saved, else the defaults",
        responses={200: MatrixThresholdSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return Response([threshold_json(m, t) for m, t in thresholds_all().items()])

    @extend_schema(
        summary="save a metric's thresholds for everyone's matrix",
        request=MatrixThresholdSerializer,
        responses=_WRITE_ANSWERS,
    )
    def post(self, request: Request) -> Response:
        serializer = MatrixThresholdSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return _save(request, serializer.validated_data)


class ThresholdAPIView(APIView):
    """One metric's thresholds (saved, else the defaults): PUT saves them for everyone,
    DELETE goes back to the defaults and answers them."""

    permission_classes = [CanSaveThresholds]
    parser_classes = PARSER_CLASSES

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        metric = kwargs["metric"]
        if metric not in METRICS:
            raise NotFound(f"unknown metric {metric!r}: one of {', '.join(METRICS)}")

    @extend_schema(
        parameters=[_METRIC],
        summary="the metric's thresholds: saved, else the defaults",
        responses={200: MatrixThresholdSerializer, **_UNKNOWN},
    )
    def get(self, request: Request, metric: str) -> Response:
        return Response(threshold_json(metric, thresholds_for(metric)))

    @extend_schema(
        parameters=[_METRIC],
        summary="save the metric's thresholds for everyone's matrix",
        request=MatrixThresholdWriteSerializer,
        responses={**_WRITE_ANSWERS, **_UNKNOWN},
    )
    def put(self, request: Request, metric: str) -> Response:
        serializer = MatrixThresholdWriteSerializer(data=request.data, context={"metric": metric})
        serializer.is_valid(raise_exception=True)
        return _save(request, serializer.validated_data)

    @extend_schema(
        parameters=[_METRIC],
        summary="back to the metric's default thresholds (answers them)",
        responses={200: MatrixThresholdSerializer, 403: _WRITE_ANSWERS[403], **_UNKNOWN},
    )
    def delete(self, request: Request, metric: str) -> Response:
        matrix_threshold_reset(metric=metric)
        return Response(threshold_json(metric, thresholds_for(metric)))


def _save(request: Request, data: dict[str, Any]) -> Response:
    metric = data["metric"]
    _, created = matrix_threshold_save(
        metric=metric, good=data["good"], bad=data["bad"], user=request.user
    )
    return Response(threshold_json(metric, thresholds_for(metric)), status=201 if created else 200)
