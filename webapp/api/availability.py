"""/api/v1/availability/: availability and reliability per site, endpoint and month (the
WLCG A/R reports' formula, with its terms): webapp/watch/availability.py."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsViewer
from webapp.sites.models import Endpoint, Site
from webapp.watch.availability import FORMULA, RULE, BadMonth, availability_months, month_parse


class AvailabilityQuery(serializers.Serializer[Any]):
    site = serializers.PrimaryKeyRelatedField[Site](queryset=Site.objects.all(), required=False)
    endpoint = serializers.PrimaryKeyRelatedField[Endpoint](
        queryset=Endpoint.objects.select_related("site"), required=False
    )
    month = serializers.CharField(required=False, help_text="YYYY-MM; default this month (UTC)")

    def validate_month(self, value: str) -> str:
        try:
            month_parse(value)
        except BadMonth as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value


class AvailabilityAPIView(APIView):
    """Availability and reliability of each site (or `site`, or only `endpoint`) for `month`:
    per site (its endpoints pooled) and per endpoint, with the formula's terms in runs."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter("site", int, description="one site"),
            OpenApiParameter("endpoint", int, description="one endpoint (and its site's line)"),
            OpenApiParameter("month", str, description="YYYY-MM (UTC); default this month"),
        ],
        responses={
            200: OpenApiResponse(
                description="{month, formula, rule, sites: [{site, name, month, total, up, "
                "down, unknown, scheduled_downtime, unscheduled_downtime, availability, "
                "reliability, endpoints: [...the same per endpoint]}]}"
            ),
            400: OpenApiResponse(description="{field: [message]}: a bad site, endpoint or month"),
        },
    )
    def get(self, request: Request) -> Response:
        query = AvailabilityQuery(data=request.query_params)
        if not query.is_valid():
            raise ValidationError(query.errors)
        chosen = query.validated_data
        endpoint: Endpoint | None = chosen.get("endpoint")
        month = month_parse(chosen.get("month") or timezone.now().strftime("%Y-%m"))
        if endpoint is not None:
            sites: Any = [endpoint.site]
        elif chosen.get("site") is not None:
            sites = [chosen["site"]]
        else:
            sites = Site.objects.order_by("name")
        rows = availability_months(sites=sites, months=[month], endpoint=endpoint)
        return Response(
            {
                "month": month.strftime("%Y-%m"),
                "formula": FORMULA,
                "rule": RULE,
                "sites": [row.to_json() for row in rows],
            }
        )
