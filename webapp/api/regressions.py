"""The regressions API (/api/v1/regressions/): the list (the page's filters), one regression
with its series, and what operators do to one (ack, silence, unsilence, resolve)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.accounts.roles import IsOperatorOrReadOnly
from webapp.api.evidence import RENDERERS as EVIDENCE_RENDERERS
from webapp.api.evidence import RESPONSES as EVIDENCE_RESPONSES
from webapp.api.evidence import evidence_response
from webapp.core.parsers import PARSER_CLASSES
from webapp.dashboards.schema import form_errors, form_parameters
from webapp.dashboards.selectors.evidence import NoEvidence, regression_evidence
from webapp.sites.models import Endpoint, Site
from webapp.watch.actions import (
    NOTE_MAX_LENGTH,
    TransitionRefused,
    regression_acknowledge,
    regression_resolve,
    regression_silence,
    regression_unsilence,
)
from webapp.watch.forms import RegressionFilterForm
from webapp.watch.models import Regression, RegressionEvent
from webapp.watch.selectors import (
    regression_detail,
    regression_get,
    regression_list,
    regression_rows,
    regressions_joined,
)

REFUSED = OpenApiResponse(
    description="{detail, state}: the regression's state does not allow it (its state)"
)
NOT_OPERATOR = OpenApiResponse(description="viewers read only: operators and admins act")
BAD_BODY = OpenApiResponse(description="{field: [message]} naming each bad field")


class RegressionSiteRefSerializer(serializers.ModelSerializer[Site]):
    class Meta:
        model = Site
        fields = ["id", "name"]


class RegressionEndpointRefSerializer(serializers.ModelSerializer[Endpoint]):
    site = serializers.IntegerField(source="site_id", read_only=True)

    class Meta:
        model = Endpoint
        fields = ["id", "name", "protocol", "site"]


class RegressionParameterSetSerializer(serializers.Serializer[Any]):
    operation = serializers.CharField()
    method = serializers.CharField()
    pattern = serializers.CharField()
    read_size = serializers.IntegerField()
    fraction = serializers.FloatField()
    clients = serializers.IntegerField()
    address_family = serializers.CharField()


class RegressionSerializer(serializers.ModelSerializer[Regression]):
    """One regression as the list gives it: what, its state and verdict, why (detector,
    blame, versions), the numbers, and who acknowledged or silenced it."""

    site = serializers.SerializerMethodField()
    endpoint = RegressionEndpointRefSerializer(read_only=True, allow_null=True)
    vantage_point = serializers.CharField(
        source="vantage_point.name", read_only=True, allow_null=True, default=None
    )
    parameter_set = serializers.SerializerMethodField()
    acknowledged_by = serializers.CharField(
        source="acknowledged_by.username", read_only=True, allow_null=True, default=None
    )
    silenced_by = serializers.CharField(
        source="silenced_by.username", read_only=True, allow_null=True, default=None
    )
    protocol = serializers.CharField(read_only=True, allow_blank=True)

    class Meta:
        model = Regression
        fields = [
            "id",
            "key",
            "tier",
            "metric",
            "state",
            "verdict",
            "severity",
            "summary",
            "site",
            "endpoint",
            "vantage_point",
            "protocol",
            "parameter_set",
            "parent",
            "detector",
            "blame",
            "versions",
            "change_night",
            "baseline",
            "current",
            "change_pct",
            "good_nights",
            "last_night",
            "opened_at",
            "updated_at",
            "resolved_at",
            "acknowledged_by",
            "acknowledged_at",
            "ack_note",
            "silenced_until",
            "silenced_by",
            "silence_note",
        ]
        read_only_fields = fields

    @extend_schema_field(RegressionSiteRefSerializer(allow_null=True))
    def get_site(self, regression: Regression) -> dict[str, Any] | None:
        site = regression.site or (regression.endpoint.site if regression.endpoint else None)
        return None if site is None else {"id": site.pk, "name": site.name}

    @extend_schema_field(RegressionParameterSetSerializer(allow_null=True))
    def get_parameter_set(self, regression: Regression) -> dict[str, Any] | None:
        if not regression.method:
            return None
        fields = (
            "operation",
            "method",
            "pattern",
            "read_size",
            "fraction",
            "clients",
            "address_family",
        )
        return {name: getattr(regression, name) for name in fields}


class RegressionEventSerializer(serializers.ModelSerializer[RegressionEvent]):
    actor = serializers.CharField(
        source="actor.username", read_only=True, allow_null=True, default=None
    )
    previous_state = serializers.CharField(read_only=True, allow_blank=True)

    class Meta:
        model = RegressionEvent
        fields = ["state", "previous_state", "at", "actor", "note"]
        read_only_fields = fields


class RegressionMemberSerializer(serializers.ModelSerializer[Regression]):
    """A regression of one series blamed on this regression's thing."""

    endpoint = RegressionEndpointRefSerializer(read_only=True, allow_null=True)
    vantage_point = serializers.CharField(
        source="vantage_point.name", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = Regression
        fields = ["id", "key", "state", "verdict", "severity", "endpoint", "vantage_point"]
        read_only_fields = fields


class RegressionNightSerializer(serializers.Serializer[Any]):
    night = serializers.DateField()
    value = serializers.FloatField(allow_null=True, help_text="the night's median (or share)")
    q1 = serializers.FloatField(allow_null=True)
    q3 = serializers.FloatField(allow_null=True)
    n = serializers.IntegerField(help_text="runs (or client records) behind the value")
    runs = serializers.IntegerField()
    server_versions = serializers.ListField(child=serializers.CharField())
    client_versions = serializers.ListField(
        child=serializers.CharField(), help_text="the client libraries or tools the runs used"
    )


class RegressionOtherViewSerializer(serializers.Serializer[Any]):
    vantage_point = serializers.CharField()
    nights = RegressionNightSerializer(many=True)


class RegressionBandSerializer(serializers.Serializer[Any]):
    median = serializers.FloatField()
    mad = serializers.FloatField(help_text="scaled to a standard deviation (x 1.4826)")
    k = serializers.FloatField()
    low = serializers.FloatField()
    high = serializers.FloatField()
    nights = serializers.IntegerField(help_text="baseline nights it was drawn from")


WINDOW_HELP = (
    "[from, to]: ISO nights (dates), or ISO times (UTC) for a verdict about moments (a "
    "queue's wait, a launch's slot, a credential's warning window); null: none"
)


class RegressionWindowsSerializer(serializers.Serializer[Any]):
    baseline = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text=WINDOW_HELP
    )
    target = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text=WINDOW_HELP
    )


class RegressionSeriesSerializer(serializers.Serializer[Any]):
    unit = serializers.CharField()
    windows = RegressionWindowsSerializer()
    nights = RegressionNightSerializer(many=True)
    band = RegressionBandSerializer(allow_null=True)
    others = RegressionOtherViewSerializer(many=True)


class RegressionDetailSerializer(RegressionSerializer):
    """The list's fields, its series around the change, its group's members and events."""

    series = serializers.SerializerMethodField()
    members = serializers.SerializerMethodField()
    members_total = serializers.SerializerMethodField()
    events = serializers.SerializerMethodField()

    class Meta(RegressionSerializer.Meta):
        fields = [*RegressionSerializer.Meta.fields, "series", "members", "members_total", "events"]
        read_only_fields = fields

    def _detail(self, regression: Regression) -> Any:
        return self.context["detail"]

    @extend_schema_field(RegressionSeriesSerializer)
    def get_series(self, regression: Regression) -> dict[str, Any]:
        detail = self._detail(regression)
        names = ("unit", "windows", "nights", "band", "others")
        return RegressionSeriesSerializer({name: detail[name] for name in names}).data

    @extend_schema_field(RegressionMemberSerializer(many=True))
    def get_members(self, regression: Regression) -> Any:
        return RegressionMemberSerializer(self._detail(regression)["members"], many=True).data

    def get_members_total(self, regression: Regression) -> int:
        return int(self._detail(regression)["members_total"])

    @extend_schema_field(RegressionEventSerializer(many=True))
    def get_events(self, regression: Regression) -> Any:
        return RegressionEventSerializer(self._detail(regression)["events"], many=True).data


class RegressionAckSerializer(serializers.Serializer[Any]):
    note = serializers.CharField(max_length=NOTE_MAX_LENGTH, help_text="why; shown to everyone")


class RegressionResolveSerializer(serializers.Serializer[Any]):
    note = serializers.CharField(max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True)


class RegressionSilenceSerializer(serializers.Serializer[Any]):
    until = serializers.DateTimeField(
        help_text="when notifications flow again (future, <= 90 days)"
    )
    note = serializers.CharField(max_length=NOTE_MAX_LENGTH, help_text="why; shown to everyone")


def _acted(responses_extra: dict[int, Any] | None = None) -> dict[int, Any]:
    return {
        200: RegressionSerializer,
        400: BAD_BODY,
        403: NOT_OPERATOR,
        404: OpenApiResponse(description="no such regression"),
        409: REFUSED,
        **(responses_extra or {}),
    }


@extend_schema_view(
    list=extend_schema(
        parameters=form_parameters(RegressionFilterForm),
        responses={200: RegressionSerializer(many=True), 400: BAD_BODY},
    ),
    retrieve=extend_schema(responses=RegressionDetailSerializer),
)
class RegressionViewSet(viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    """Regressions, severity first then newest (filters as on the page); each with the
    detector that found it, what it was blamed on and the version changes near it.
    Operators and admins acknowledge, silence, unsilence and resolve them."""

    serializer_class = RegressionSerializer
    permission_classes = [IsOperatorOrReadOnly]
    parser_classes = PARSER_CLASSES

    def get_queryset(self) -> QuerySet[Regression]:
        return regressions_joined()

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = RegressionFilterForm(request.query_params)
        if not form.is_valid():
            return Response(form_errors(form), status=status.HTTP_400_BAD_REQUEST)
        keys = regression_list(filters=form.cleaned_data)
        page = self.paginate_queryset(keys)
        rows = regression_rows(keys=[row.pk for row in (keys if page is None else page)])
        data = RegressionSerializer(rows, many=True).data
        return Response(data) if page is None else self.get_paginated_response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        regression = self.get_object()
        context = {"detail": regression_detail(regression=regression)}
        return Response(RegressionDetailSerializer(regression, context=context).data)

    @extend_schema(
        responses={
            **EVIDENCE_RESPONSES,
            409: OpenApiResponse(
                description="{detail}: a regression about a group of series (its members "
                "have evidence)"
            ),
        }
    )
    @action(detail=True, methods=["get"], renderer_classes=EVIDENCE_RENDERERS)
    def evidence(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The regression's evidence for a site ticket, one zip: its summary, its series
        around the change, the failing runs, the other vantage points over its target window,
        versions and the commands to reproduce it by hand (docs/evidence.md)."""
        regression = self.get_object()
        try:
            evidence = regression_evidence(regression=regression)
        except NoEvidence as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        page = reverse("dashboards:regression-evidence", args=[regression.pk])
        return evidence_response(request, evidence, page=page)

    @extend_schema(request=RegressionAckSerializer, responses=_acted())
    @action(detail=True, methods=["post"])
    def ack(self, request: Request, pk: str | None = None) -> Response:
        """Acknowledge an open or recovering regression, with a note (who: you)."""
        return self._act(
            request,
            RegressionAckSerializer,
            lambda r, data: regression_acknowledge(
                regression=r, user=_user(request), note=data["note"]
            ),
        )

    @extend_schema(request=RegressionResolveSerializer, responses=_acted())
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        """Resolve it by hand (any live state), with an optional note."""
        return self._act(
            request,
            RegressionResolveSerializer,
            lambda r, data: regression_resolve(
                regression=r, user=_user(request), note=data.get("note", "")
            ),
        )

    @extend_schema(request=RegressionSilenceSerializer, responses=_acted())
    @action(detail=True, methods=["post"])
    def silence(self, request: Request, pk: str | None = None) -> Response:
        """Hold its notifications back until `until` (in the future, at most 90 days), with a
        note; its state still changes as nights come in."""
        return self._act(
            request,
            RegressionSilenceSerializer,
            lambda r, data: regression_silence(
                regression=r, user=_user(request), until=data["until"], note=data["note"]
            ),
        )

    @extend_schema(request=None, responses=_acted())
    @action(detail=True, methods=["post"])
    def unsilence(self, request: Request, pk: str | None = None) -> Response:
        """Lift its silence now."""
        return self._act(request, None, lambda r, data: regression_unsilence(regression=r))

    def _act(
        self,
        request: Request,
        body_class: type[serializers.Serializer[Any]] | None,
        change: Callable[[Regression, dict[str, Any]], object],
    ) -> Response:
        """404 for no such regression, then 400 naming a bad field, 409 {detail, state} for a
        state that does not allow the change, else 200 with the regression as it is now."""
        regression = self.get_object()
        data: dict[str, Any] = {}
        if body_class is not None:
            body = body_class(data=request.data)
            body.is_valid(raise_exception=True)
            data = dict(body.validated_data)
        try:
            change(regression, data)
        except DjangoValidationError as exc:
            return Response(exc.message_dict, status=status.HTTP_400_BAD_REQUEST)
        except TransitionRefused as exc:
            regression.refresh_from_db(fields=["state"])
            refused = {"detail": str(exc), "state": regression.state}
            return Response(refused, status=status.HTTP_409_CONFLICT)
        return Response(RegressionSerializer(regression_get(pk=regression.pk)).data)


def _user(request: Request) -> User:
    """The acting user: IsOperatorOrReadOnly let only an operator or an admin this far."""
    return cast(User, request.user)
