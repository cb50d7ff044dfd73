"""Query-parameter filters of the API (the same names the pages use for permalinks)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField

from webapp.campaigns.models import Run


class UTCDateTimeField(IsoDateTimeField):
    """An ISO 8601 time, passed to the database in UTC: PostgreSQL refuses offsets past
    +-15:59 that Python accepts (2026-01-01T00:00+16:01 was a 500)."""

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError(f"{value!r} is out of range", code="invalid") from None


class UTCDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UTCDateTimeField


class RunFilter(django_filters.FilterSet):
    created_after = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UTCDateTimeFilter(field_name="created_at", lookup_expr="lt")
    vantage_point = django_filters.CharFilter(field_name="vantage_point__name")
    # distinct=False: a run has one status, and DISTINCT would sort every matching row.
    status = django_filters.MultipleChoiceFilter(choices=Run.Status.choices, distinct=False)
    server_version = django_filters.CharFilter(
        lookup_expr="icontains", help_text="runs whose server reported this (part of a) version"
    )

    class Meta:
        model = Run
        fields = [
            "campaign",
            "endpoint",
            "vantage_point",
            "status",
            "method",
            "pattern",
            "read_size",
            "clients",
            "trigger",
            "auth",
            "server_version",
        ]
