"""The REST API (/api/v1/): thin views over services and selectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model, ProtectedError, QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import CanEditObject, IsOperatorOrReadOnly
from webapp.api.configuration import CampaignConfigurationActions
from webapp.api.evidence import RENDERERS as EVIDENCE_RENDERERS
from webapp.api.evidence import RESPONSES as EVIDENCE_RESPONSES
from webapp.api.evidence import evidence_response
from webapp.api.permissions import (
    CanCancelCampaign,
    CanCancelRun,
    CanEditRow,
    CanPauseSchedule,
    IsAdminOrReadOnly,
)
from webapp.api.run_csv import CSVRenderer, run_csv_lines
from webapp.api.serializers import (
    CampaignScheduleSerializer,
    CampaignSerializer,
    EndpointSerializer,
    RunDetailSerializer,
    RunListSerializer,
    SiteSerializer,
    TestFileAddedSerializer,
    TestFileCreateSerializer,
    TestFileSerializer,
    VantagePointSerializer,
)
from webapp.campaigns.filters import RunFilter
from webapp.campaigns.health import VantagePointHealth, vantage_points_health
from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Campaign, Run
from webapp.campaigns.run_detail import run_charts
from webapp.campaigns.schedules import (
    ScheduleConflict,
    campaign_schedule_pause,
    campaign_schedule_resume,
    campaign_schedule_state,
)
from webapp.campaigns.selectors import endpoint_series, run_json, run_list
from webapp.campaigns.services import (
    LaunchWhileActive,
    campaign_cancel,
    campaign_launch,
    run_cancel,
    run_cancel_refusal,
)
from webapp.campaigns.validation import MAX_ID
from webapp.core.parsers import PARSER_CLASSES
from webapp.dashboards.selectors.evidence import run_evidence_get
from webapp.dashboards.serializers import ParameterSetSerializer
from webapp.sites.models import Endpoint, Site, VantagePoint
from webapp.sites.services import endpoint_file_add


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class KeepMeasuredOnDestroy:
    """Deleting a row that runs refer to (an endpoint, its site, a vantage point) answers 409
    and deletes nothing: the runs' results are kept."""

    @extend_schema(
        responses={204: None, 409: OpenApiResponse(description="runs refer to it: not deleted")}
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().destroy(request, *args, **kwargs)  # type: ignore[misc]
        return response

    def perform_destroy(self, instance: Model) -> None:
        try:
            instance.delete()  # collects (and refuses) before it deletes anything
        except ProtectedError as exc:
            runs = sum(isinstance(row, Run) for row in exc.protected_objects)
            advice = "; disable it instead" if isinstance(instance, Endpoint) else ""
            raise Conflict(
                f"{instance} cannot be deleted: {runs} runs refer to it and their results "
                f"are kept{advice}"
            ) from None


class OwnedViewSet(KeepMeasuredOnDestroy, viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Rows with an owner: operators create (and own), owners and admins edit."""

    permission_classes = [CanEditObject]
    parser_classes = PARSER_CLASSES

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        serializer.save(owner=self.request.user)


class SiteViewSet(OwnedViewSet):
    """Any operator creates a site (and owns it); its owner or an admin changes it."""

    queryset = Site.objects.select_related("owner").prefetch_related("endpoints").order_by("name")
    serializer_class = SiteSerializer
    filterset_fields = ["tier", "storage_system"]
    permission_classes = [CanEditRow]


class EndpointViewSet(OwnedViewSet):
    """An endpoint is added to, changed on and moved to a site by that site's owner or an
    admin only (Endpoint.editable_by)."""

    queryset = Endpoint.objects.select_related("site").prefetch_related("files").order_by("name")
    serializer_class = EndpointSerializer
    filterset_fields = ["site", "protocol", "role", "enabled"]
    permission_classes = [CanEditRow]

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        self._check_site(serializer.validated_data["site"])
        super().perform_create(serializer)

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        if "site" in serializer.validated_data:
            self._check_site(serializer.validated_data["site"])
        super().perform_update(serializer)

    @extend_schema(
        request=TestFileCreateSerializer,
        responses={
            201: TestFileAddedSerializer,
            400: OpenApiResponse(
                description="by field: a bad path, a size the server could not give, or a "
                "size or adler32 the server contradicts; nothing is added"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def files(self, request: Request, pk: str | None = None) -> Response:
        """Add a test file. A size or adler32 left out is asked of the storage server from
        the web host, with the endpoint's credential (as Test connection); `found` says
        where each value came from."""
        endpoint = self.get_object()
        serializer = TestFileCreateSerializer(data=request.data, context={"endpoint": endpoint})
        serializer.is_valid(raise_exception=True)
        test_file = endpoint_file_add(endpoint=endpoint, **serializer.validated_data)
        assert serializer.fill is not None  # validate() ran
        body = {**TestFileSerializer(test_file).data, "found": serializer.fill.found()}
        return Response(body, status=status.HTTP_201_CREATED)

    def _check_site(self, site: Site) -> None:
        if not site.editable_by(self.request.user):
            raise PermissionDenied(
                f"site {site.name}: only its owner or an admin may add or move endpoints to it"
            )


class VantagePointViewSet(KeepMeasuredOnDestroy, viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Every role reads; admins create, change and delete (a vantage point names the queue
    deployed workers consume); the built-in `local` one is never renamed nor deleted."""

    queryset = VantagePoint.objects.order_by("name")
    serializer_class = VantagePointSerializer
    permission_classes = [IsAdminOrReadOnly]
    parser_classes = PARSER_CLASSES
    health: dict[int, VantagePointHealth]

    def paginate_queryset(self, queryset: QuerySet[Any, Any] | Sequence[Any]) -> list[Any] | None:
        page = super().paginate_queryset(queryset)
        # The page's health in two queries and one broker connection, not per row.
        self.health = vantage_points_health(
            vantage_points=queryset if page is None else page, broker=True
        )
        return page

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "health": getattr(self, "health", {})}

    def perform_destroy(self, instance: Model) -> None:
        assert isinstance(instance, VantagePoint)
        refusal = instance.delete_refusal()
        if refusal:
            raise Conflict(refusal)
        super().perform_destroy(instance)


class CampaignViewSet(CampaignConfigurationActions, OwnedViewSet):
    queryset = (
        Campaign.objects.select_related("owner")
        .prefetch_related("endpoints", "test_files", "vantage_points")
        .order_by("-created_at", "-id")
    )
    serializer_class = CampaignSerializer

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        serializer.save(owner=self.request.user)  # CampaignSerializer.create: campaign_save

    @extend_schema(
        request=None,
        parameters=[
            OpenApiParameter(
                "again",
                bool,
                description="1: launch even while runs of the campaign are still queued or "
                "running (they are queued a second time)",
            )
        ],
        responses={
            201: inline_serializer(
                "Launched", {"runs": serializers.ListField(child=serializers.IntegerField())}
            ),
            409: OpenApiResponse(
                description="{detail, active}: runs of the campaign are still queued or "
                "running (active: how many); nothing launched. Add ?again=1 to launch anyway."
            ),
        },
    )
    # Launching is not editing: any operator may launch any campaign (as on its page).
    @action(detail=True, methods=["post"], permission_classes=[IsOperatorOrReadOnly])
    def launch(self, request: Request, pk: str | None = None) -> Response:
        """Queue the campaign's runs. While runs of it are still queued or running, answer
        409 and launch nothing, unless ?again=1."""
        campaign = self.get_object()
        again = request.query_params.get("again", "").lower() in ("1", "true", "yes")
        try:
            runs = campaign_launch(
                campaign=campaign, trigger=Run.Trigger.API, user=request.user, if_idle=not again
            )
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        except LaunchWhileActive as exc:
            body = {"detail": f"{exc}: add ?again=1 to launch anyway", "active": exc.active}
            return Response(body, status=status.HTTP_409_CONFLICT)
        return Response({"runs": [run.pk for run in runs]}, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={
            202: OpenApiResponse(description="{cancelled: [run ids], stopping: [run ids]}"),
            403: OpenApiResponse(description="neither its owner, an admin nor a launcher"),
            409: OpenApiResponse(description="no queued or running run"),
        },
    )
    @action(detail=True, methods=["post"], permission_classes=[CanCancelCampaign])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel every queued run of the campaign; ask every running one to stop. Its owner
        or an admin cancels them all; an operator who launched some of them, those (403 for
        anyone else)."""
        campaign = self.get_object()
        runs = campaign.runs_cancellable_by(request.user)
        done = campaign_cancel(campaign=campaign, runs=runs)
        if not done.cancelled and not done.stopping:
            return Response(
                {"detail": "the campaign has no queued or running run"},
                status=status.HTTP_409_CONFLICT,
            )
        body = {"cancelled": done.cancelled, "stopping": done.stopping}
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=CampaignScheduleSerializer)
    @action(detail=True, methods=["get"])
    def schedule(self, request: Request, pk: str | None = None) -> Response:
        """The campaign's schedule: its cron in words, whether it is paused, its next slot
        and its latest scheduled launches with their runs by outcome (or the error)."""
        state = campaign_schedule_state(campaign=self.get_object(), with_cost=True)
        return Response(CampaignScheduleSerializer(state).data)

    @extend_schema(
        request=None,
        responses={
            200: CampaignScheduleSerializer,
            403: OpenApiResponse(description="neither the campaign's owner nor an admin"),
            409: OpenApiResponse(
                description="{detail, schedule_paused}: already paused (since when), or the "
                "campaign has no schedule"
            ),
        },
    )
    @action(detail=True, methods=["post"], permission_classes=[CanPauseSchedule])
    def pause(self, request: Request, pk: str | None = None) -> Response:
        """Pause the campaign's schedule: its cron is kept and launches nothing until
        resumed. Its owner or an admin."""
        return self._schedule_change(campaign_schedule_pause)

    @extend_schema(
        request=None,
        responses={
            200: CampaignScheduleSerializer,
            403: OpenApiResponse(description="neither the campaign's owner nor an admin"),
            409: OpenApiResponse(description="{detail, schedule_paused}: not paused"),
        },
    )
    @action(detail=True, methods=["post"], permission_classes=[CanPauseSchedule])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        """Resume a paused schedule from its next slot: the slots that passed while it was
        paused are not launched. Its owner or an admin."""
        return self._schedule_change(campaign_schedule_resume)

    def _schedule_change(self, change: Callable[..., Campaign]) -> Response:
        campaign = self.get_object()
        try:
            campaign = change(campaign=campaign)
        except ScheduleConflict as exc:
            body = {"detail": str(exc), "schedule_paused": campaign.schedule_paused}
            return Response(body, status=status.HTTP_409_CONFLICT)
        state = campaign_schedule_state(campaign=campaign, with_cost=True)
        return Response(CampaignScheduleSerializer(state).data)


class RunViewSet(viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    serializer_class = RunListSerializer
    filterset_class = RunFilter
    permission_classes = [IsOperatorOrReadOnly]
    parser_classes = PARSER_CLASSES

    def get_queryset(self) -> QuerySet[Run]:
        if self.action == "retrieve":
            return Run.objects.select_related(
                "endpoint", "vantage_point", "test_file"
            ).prefetch_related("attempts")
        return run_list()

    @extend_schema(responses=RunDetailSerializer)
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        run = self.get_object()
        return Response({**run_json(run), **run_charts(run)})

    @extend_schema(
        request=None,
        responses={
            202: RunListSerializer,
            403: OpenApiResponse(description="not the campaign's owner, the launcher or an admin"),
            409: OpenApiResponse(
                description="{detail, status}: the run has already ended (its status)"
            ),
        },
    )
    @action(detail=True, methods=["post"], permission_classes=[CanCancelRun])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a queued run; ask a running one to stop: its campaign's owner, whoever
        launched it, or an admin. A run that has already ended answers 409 with its status."""
        run = self.get_object()
        refusal = run_cancel_refusal(run)
        if refusal:
            body = {"detail": refusal, "status": run.status}
            return Response(body, status=status.HTTP_409_CONFLICT)
        run = run_cancel(run=run)
        return Response(RunListSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=EVIDENCE_RESPONSES)
    @action(detail=True, methods=["get"], renderer_classes=EVIDENCE_RENDERERS)
    def evidence(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The run's evidence for a site ticket, one zip: what is wrong, its series around
        it, the failing runs, the other vantage points, versions and the commands to
        reproduce it by hand (docs/evidence.md)."""
        run = self.get_object()
        evidence = run_evidence_get(pk=run.pk)
        page = reverse("dashboards:run-evidence", args=[run.pk])
        return evidence_response(request, evidence, page=page)

    @extend_schema(
        responses={
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="the runs the filters select, in their order, as CSV (streamed, "
                "no page limit): id, status, error_class, error_message, wall_s, "
                "throughput_mbps, endpoint, endpoint_url, vantage_point, campaign, the "
                "parameters, created_at, started_at, finished_at",
            ),
            400: OpenApiResponse(description="a filter or the ordering is not valid (named)"),
        },
    )
    @action(detail=False, methods=["get"], renderer_classes=[JSONRenderer, CSVRenderer])
    def csv(self, request: Request) -> StreamingHttpResponse:
        """The run list as CSV: the same filters and ordering, every matching run."""
        runs = self.filter_queryset(self.get_queryset())
        return StreamingHttpResponse(
            run_csv_lines(runs),
            content_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="runs.csv"'},
        )


def _series_fraction(value: float) -> None:
    if not 0 < value <= 1:
        raise serializers.ValidationError("must be in (0, 1]")


class SeriesQuery(serializers.Serializer[Any]):
    endpoint = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), min_length=1, max_length=50
    )
    metric = serializers.ChoiceField(choices=sorted(METRICS))
    bucket = serializers.ChoiceField(choices=["day", "hour"], default="day")
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    operation = serializers.CharField(required=False)
    method = serializers.CharField(required=False)
    pattern = serializers.CharField(required=False)
    read_size = serializers.IntegerField(required=False, min_value=1)
    fraction = serializers.FloatField(
        required=False, validators=[_series_fraction], help_text="fraction of the file, (0, 1]"
    )
    clients = serializers.IntegerField(required=False, min_value=1)
    address_family = serializers.ChoiceField(
        choices=["any", "4", "6"],
        required=False,
        help_text="the family runs were held to: any, 4 or 6",
    )
    vantage_point = serializers.CharField(required=False)
    mix = serializers.BooleanField(
        default=False,
        help_text="1: every parameter set the filters let through counts. Default: one "
        "parameter set (operation, method, pattern, read_size, fraction, clients, "
        "address_family), the one the filters name in full, else the most measured one that "
        "agrees with them.",
    )


class SeriesPoint(serializers.Serializer[Any]):
    t = serializers.DateTimeField(help_text="the bucket's start (UTC)")
    n = serializers.IntegerField(help_text="measured runs")
    mean = serializers.FloatField()
    median = serializers.FloatField()
    min = serializers.FloatField()
    max = serializers.FloatField()


class SeriesSerializer(serializers.Serializer[Any]):
    endpoint = serializers.IntegerField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    parameter_set = ParameterSetSerializer(
        allow_null=True, help_text="the runs' parameter set; null with mix=1 or no runs"
    )
    points = SeriesPoint(many=True)


class SeriesView(APIView):
    """One metric over time for chosen endpoints, of one parameter set (unless mix=1),
    aggregated per day or hour: count, mean, median, min and max of the measured runs."""

    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(parameters=[SeriesQuery], responses={200: SeriesSerializer(many=True)})
    def get(self, request: Request) -> Response:
        raw: dict[str, object] = {k: v for k, v in request.query_params.items() if k != "endpoint"}
        raw["endpoint"] = request.query_params.getlist("endpoint")
        query = SeriesQuery(data=raw)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        filters = {k: data[k] for k in PARAMETER_SET_FIELDS if k in data}
        if "vantage_point" in data:
            filters["vantage_point__name"] = data["vantage_point"]
        series = endpoint_series(
            endpoint_ids=data["endpoint"],
            metric=data["metric"],
            since=data.get("since"),
            until=data.get("until"),
            bucket=data["bucket"],
            filters=filters,
            mix=data["mix"],
        )
        return Response(series)
