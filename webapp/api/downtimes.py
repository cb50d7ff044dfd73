"""/api/v1/downtimes/: declared downtimes of sites and endpoints (GOCDB's shape), over the
services of webapp/sites/downtimes.py; viewers read, a site's owner or an admin writes."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.accounts.roles import IsOperatorOrReadOnly
from webapp.core.parsers import PARSER_CLASSES
from webapp.sites.downtimes import (
    DowntimeFields,
    DowntimeNotAllowed,
    DowntimeRefused,
    downtime_create,
    downtime_delete,
    downtime_editable_by,
    downtime_list,
    downtime_update,
)
from webapp.sites.models import Downtime, Endpoint, Site


class DowntimeSerializer(serializers.ModelSerializer[Downtime]):
    site = serializers.PrimaryKeyRelatedField[Site](
        queryset=Site.objects.all(), required=False, allow_null=True, help_text="a site, or"
    )
    endpoint = serializers.PrimaryKeyRelatedField[Endpoint](
        queryset=Endpoint.objects.all(), required=False, allow_null=True, help_text="an endpoint"
    )
    scheduled = serializers.BooleanField(help_text="declared ahead of time (GOCDB's SCHEDULED)")
    # allow_null, not default=None: a read-only default is skipped in a PATCH's answer
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, allow_null=True
    )
    active = serializers.SerializerMethodField(help_text="it covers now")

    class Meta:
        model = Downtime
        fields = [
            "id",
            "site",
            "endpoint",
            "start",
            "end",
            "severity",
            "scheduled",
            "description",
            "active",
            "created_by",
            "created_at",
        ]

    def get_active(self, downtime: Downtime) -> bool:
        return downtime.start <= timezone.now() < downtime.end


class DowntimeQuery(serializers.Serializer[Any]):
    """The list's filters (a bad value: 400 naming it)."""

    site = serializers.PrimaryKeyRelatedField[Site](queryset=Site.objects.all(), required=False)
    endpoint = serializers.PrimaryKeyRelatedField[Endpoint](
        queryset=Endpoint.objects.all(), required=False
    )
    active = serializers.BooleanField(required=False, allow_null=True, default=None)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)


FILTERS = [
    OpenApiParameter("site", int, description="the site's own and its endpoints' downtimes"),
    OpenApiParameter("endpoint", int, description="the endpoint's own and its site's"),
    OpenApiParameter("active", bool, description="true: those covering now; false: the others"),
    OpenApiParameter("since", str, description="ISO time: those ending after it"),
    OpenApiParameter("until", str, description="ISO time: those starting before it"),
]


@extend_schema_view(list=extend_schema(parameters=FILTERS))
class DowntimeViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Downtimes: a site's or one endpoint's (one of them), start < end, severity outage or
    warning, scheduled or not. Viewers read; a site's owner or an admin declares, changes and
    deletes its (and its endpoints') downtimes. Bad input: 400 naming the field, nothing
    stored."""

    serializer_class = DowntimeSerializer
    permission_classes = [IsOperatorOrReadOnly]
    parser_classes = PARSER_CLASSES
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> Any:
        if self.action != "list":
            return Downtime.objects.select_related("site", "endpoint__site", "created_by")
        query = DowntimeQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        chosen = query.validated_data
        return downtime_list(
            site=chosen.get("site"),
            endpoint=chosen.get("endpoint"),
            active=chosen.get("active"),
            since=chosen.get("since"),
            until=chosen.get("until"),
        )

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        fields = DowntimeFields(
            site=data.get("site"),
            endpoint=data.get("endpoint"),
            start=data["start"],
            end=data["end"],
            severity=data["severity"],
            scheduled=data["scheduled"],
            description=data.get("description", ""),
        )
        downtime = _refused_as_400(lambda: downtime_create(fields=fields, created_by=request.user))
        return Response(self.get_serializer(downtime).data, status=201)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        downtime = self.get_object()
        serializer = self.get_serializer(downtime, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        _check_editable(downtime, request)
        updated = _refused_as_400(
            lambda: downtime_update(downtime=downtime, changes=changes, user=request.user)
        )
        return Response(self.get_serializer(updated).data)

    def perform_destroy(self, instance: Downtime) -> None:
        _check_editable(instance, self.request)
        downtime_delete(downtime=instance, user=self.request.user)


def _check_editable(downtime: Downtime, request: Request) -> None:
    if not downtime_editable_by(downtime, request.user):
        raise PermissionDenied("only its site's owner or an admin changes or deletes it")


def _refused_as_400(call: Any) -> Downtime:
    try:
        downtime: Downtime = call()
    except DowntimeRefused as exc:
        raise ValidationError({exc.field: [exc.message]}) from None
    except DowntimeNotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    return downtime
