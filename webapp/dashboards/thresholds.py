"""The matrix's thresholds: per metric, the good and bad boundaries that colour everyone's
matrix. Those an operator saved, else the shipped defaults; boundaries in a page's query
override both for that view only. Which way is better is the metric's (higher_is_better),
not the operator's to choose."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.roles import IsOperatorOrReadOnly, User, can_view, user_role
from webapp.api.parsers import PARSER_CLASSES
from webapp.campaigns.selectors import SERIES_METRICS
from webapp.dashboards.models import MatrixThreshold
from webapp.dashboards.parameter_sets import higher_is_better

Source = Literal["address", "saved", "default"]

# (good, bad) in the metric's unit, so that a matrix is coloured before anyone saves any:
# WLCG-scale figures for one run of a nightly probe (a site that serves under 10 MB/s or
# opens a file in over 2 s is worth a look). Operators replace them with their own.
DEFAULTS: dict[str, tuple[float, float]] = {
    "throughput_mbps": (100.0, 10.0),
    "wall_s": (10.0, 60.0),
    "open_s": (0.5, 2.0),
    "ttfb_s": (0.5, 2.0),
    "latency_p50_us": (10_000.0, 100_000.0),
    "latency_p90_us": (20_000.0, 200_000.0),
    "latency_p99_us": (50_000.0, 500_000.0),
    "cpu_s": (1.0, 10.0),
    "bytes_wire": (1e9, 1e10),
}
SAVE_REFUSAL = "only operators and admins save the matrix's thresholds"


@dataclass(frozen=True)
class Thresholds:
    """good/bad boundaries of a metric: for higher-is-better metrics a value at or above
    `good` is good and at or below `bad` is bad; the other way round otherwise. `source`
    says where they come from: the page's address, an operator's save, or the defaults."""

    good: float
    bad: float
    higher_is_better: bool
    source: Source = "address"
    saved_by: str | None = None
    saved_at: datetime | None = None

    def rate(self, value: float | None) -> str | None:
        if value is None:
            return None
        if self.higher_is_better:
            return "good" if value >= self.good else "bad" if value <= self.bad else "warn"
        return "good" if value <= self.good else "bad" if value >= self.bad else "warn"

    def as_json(self) -> dict[str, Any]:
        return {
            "good": self.good,
            "bad": self.bad,
            "source": self.source,
            "saved_by": self.saved_by,
            "saved_at": self.saved_at,
        }


def order_error(*, metric: str, good: float, bad: float) -> str | None:
    """Why bad is on the wrong side of good for this metric, or None."""
    if higher_is_better(metric) and bad > good:
        return f"{metric}: higher is better, so bad must be at most good"
    if not higher_is_better(metric) and bad < good:
        return f"{metric}: lower is better, so bad must be at least good"
    return None


def threshold_errors(*, metric: str, good: float, bad: float) -> dict[str, list[str]]:
    """{field: [message]} of boundaries that may not be saved for `metric`; {} if none."""
    if metric not in SERIES_METRICS:
        return {"metric": [f"unknown metric {metric!r}: one of {', '.join(SERIES_METRICS)}"]}
    errors: dict[str, list[str]] = {}
    for name, value in (("good", good), ("bad", bad)):
        if not math.isfinite(value):
            errors[name] = ["must be a finite number"]
        elif value < 0:
            errors[name] = [f"must be at least 0 ({SERIES_METRICS[metric]})"]
    order = None if errors else order_error(metric=metric, good=good, bad=bad)
    if order:
        errors["bad"] = [order]
    return errors


def _from_row(metric: str, row: MatrixThreshold | None) -> Thresholds:
    if row is None:
        good, bad = DEFAULTS[metric]
        return Thresholds(good, bad, higher_is_better(metric), source="default")
    user = row.saved_by.get_username() if row.saved_by else None
    return Thresholds(
        row.good, row.bad, higher_is_better(metric), "saved", saved_by=user, saved_at=row.saved_at
    )


def thresholds_for(metric: str) -> Thresholds:
    """The metric's saved thresholds, else its defaults (one query)."""
    row = MatrixThreshold.objects.select_related("saved_by").filter(metric=metric).first()
    return _from_row(metric, row)


def thresholds_all() -> dict[str, Thresholds]:
    """Every metric's thresholds, saved or default, in SERIES_METRICS order (one query)."""
    rows = {r.metric: r for r in MatrixThreshold.objects.select_related("saved_by")}
    return {metric: _from_row(metric, rows.get(metric)) for metric in SERIES_METRICS}


def thresholds_in_effect(*, metric: str, good: float | None, bad: float | None) -> Thresholds:
    """The query's boundaries when it gives both (no query), else the metric's own."""
    if good is not None and bad is not None:
        return Thresholds(good, bad, higher_is_better(metric))
    return thresholds_for(metric)


def matrix_threshold_save(
    *, metric: str, good: float, bad: float, user: User | None
) -> tuple[MatrixThreshold, bool]:
    """Save the metric's thresholds for everyone: (the row, whether it is new). Boundaries
    that threshold_errors refuses raise ValidationError and change nothing."""
    errors = threshold_errors(metric=metric, good=good, bad=bad)
    if errors:
        raise ValidationError(errors)
    saved_by = user if user is not None and user.is_authenticated else None
    with transaction.atomic():
        return MatrixThreshold.objects.update_or_create(
            metric=metric,
            defaults={"good": good, "bad": bad, "saved_by": saved_by, "saved_at": timezone.now()},
        )


def matrix_threshold_reset(*, metric: str) -> bool:
    """Back to the defaults: whether there was a saved row to remove."""
    deleted, _ = MatrixThreshold.objects.filter(metric=metric).delete()
    return deleted > 0


# The API: /api/v1/matrix/thresholds/ and /api/v1/matrix/thresholds/{metric}/


class CanSaveThresholds(IsOperatorOrReadOnly):
    """Reads for any role; saves for operators and admins, and a viewer is told why."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        allowed = super().has_permission(request, view)
        if not allowed and can_view(request.user):
            self.message = f"{SAVE_REFUSAL}: you are a {user_role(request.user)}"
        return allowed


class MatrixThresholdSerializer(serializers.Serializer[Thresholds]):
    """A metric's thresholds in effect; `good` and `bad` (and `metric` on POST) are written."""

    metric = serializers.ChoiceField(choices=list(SERIES_METRICS))
    unit = serializers.CharField(read_only=True)
    higher_is_better = serializers.BooleanField(read_only=True)
    good = serializers.FloatField(help_text="boundary, in the metric's unit, at least 0")
    bad = serializers.FloatField(help_text="boundary, in the metric's unit, at least 0")
    source = serializers.ChoiceField(
        choices=["saved", "default"], read_only=True, help_text="an operator's, or the defaults"
    )
    saved_by = serializers.CharField(read_only=True, allow_null=True)
    saved_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        metric = attrs.setdefault("metric", self.context.get("metric"))
        errors = threshold_errors(metric=metric, good=attrs["good"], bad=attrs["bad"])
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MatrixThresholdWriteSerializer(MatrixThresholdSerializer):
    """PUT: the metric is the path's."""

    metric = serializers.CharField(read_only=True)


def threshold_json(metric: str, thresholds: Thresholds) -> dict[str, Any]:
    return {
        "metric": metric,
        "unit": SERIES_METRICS[metric],
        "higher_is_better": thresholds.higher_is_better,
        **thresholds.as_json(),
    }


_WRITE_ANSWERS = {
    200: MatrixThresholdSerializer,
    201: MatrixThresholdSerializer,
    400: OpenApiResponse(description="{field: [message]} for each bad field: nothing saved"),
    403: OpenApiResponse(description="not an operator or admin: nothing saved"),
}
_UNKNOWN = {404: OpenApiResponse(description="unknown metric")}
_METRIC = OpenApiParameter(
    "metric", str, OpenApiParameter.PATH, enum=list(SERIES_METRICS), description="the metric"
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
        if metric not in SERIES_METRICS:
            raise NotFound(f"unknown metric {metric!r}: one of {', '.join(SERIES_METRICS)}")

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
