"""The run list's query-parameter filters, shared by the campaigns pages and the API."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import F, OrderBy, QuerySet
from django.db.models.fields.json import KT
from django_filters.fields import IsoDateTimeField

from webapp.campaigns.models import Run
from workers.engine.errors import ErrorClass

# The run list's sortable columns (?ordering=NAME, or -NAME for descending) and the columns
# each sorts by, id last so pages never overlap: each is read from an index in both
# directions (run_newest_idx, the status index, run_wall_idx, run_throughput_idx), so a
# year of runs is not sorted to show 50 of them (docs/benchmarks.md).
RUN_ORDERING: dict[str, tuple[str, ...]] = {
    "created": ("created_at",),
    "status": ("status", "created_at"),
    "wall_s": ("wall_s",),
    "throughput_mbps": ("throughput_mbps",),
}
# Columns that may be empty (no throughput for a failed run, no wall time yet for a running
# one): empty is largest, as in PostgreSQL's indexes, on SQLite too (which says smallest).
NULLABLE = frozenset({"wall_s", "throughput_mbps"})


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


class RunOrderingFilter(django_filters.OrderingFilter):
    """?ordering=-wall_s: one of RUN_ORDERING's names (or several, comma separated); any
    other is a validation error naming this field."""

    def filter(self, qs: QuerySet[Run], value: Sequence[str] | None) -> QuerySet[Run]:
        params = [param for param in value or () if param]
        if not params:
            return qs
        order = [term for param in params for term in _order_by(param)]
        tie = F("id").desc() if params[-1].startswith("-") else F("id").asc()
        return qs.order_by(*order, tie)


def _order_by(param: str) -> list[OrderBy]:
    descending = param.startswith("-")
    terms = []
    for name in RUN_ORDERING[param.lstrip("-")]:
        if name not in NULLABLE:
            terms.append(F(name).desc() if descending else F(name).asc())
        elif descending:
            terms.append(F(name).desc(nulls_first=True))
        else:
            terms.append(F(name).asc(nulls_last=True))
    return terms


def with_first_error(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs with their first error's class and message (error_class, error_message: None
    for runs without errors), read from the JSON in SQL, without the rest of it."""
    return runs.annotate(error_class=KT("errors__0__class"), error_message=KT("errors__0__message"))


class RunFilter(django_filters.FilterSet):
    """The run list's filters. Each filter that is not plainly a Run column has its label
    here: django-filter makes one from the lookup ("Created at is greater than or equal
    to") or, for a filter with a method, writes "[invalid name]"."""

    created_after = UTCDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="Created from (UTC)"
    )
    created_before = UTCDateTimeFilter(
        field_name="created_at", lookup_expr="lt", label="Created before (UTC)"
    )
    vantage_point = django_filters.CharFilter(
        field_name="vantage_point__name", label="Vantage point"
    )
    # distinct=False: a run has one status, and DISTINCT would sort every matching row.
    status = django_filters.MultipleChoiceFilter(choices=Run.Status.choices, distinct=False)
    server_version = django_filters.CharFilter(
        lookup_expr="icontains",
        label="Server version",
        help_text="runs whose server reported this (part of a) version",
    )
    error_class = django_filters.ChoiceFilter(
        choices=[(c.value, c.value) for c in ErrorClass],
        method="filter_error_class",
        label="First error",
        help_text="runs whose first error is of this class",
    )
    ordering = RunOrderingFilter(
        fields=[(name, name) for name in RUN_ORDERING],
        label="Sort by",
        help_text=f"sort by {', '.join(RUN_ORDERING)}; -NAME sorts descending",
    )

    class Meta:
        model = Run
        fields = [
            "campaign",
            "endpoint",
            "vantage_point",
            "status",
            "operation",
            "method",
            "pattern",
            "read_size",
            "clients",
            "address_family",
            "trigger",
            "auth",
            "server_version",
            "error_class",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Model fields whose verbose name does not say what to type.
        self.filters["read_size"].label = "Read size (bytes)"
        self.filters["auth"].label = "Authentication"
        self.filters["address_family"].label = "Address family"

    def filter_error_class(self, queryset: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
        # Only these statuses carry errors (a run succeeds without any): the status index
        # then spares reading every run's JSON.
        return queryset.filter(status__in=Run.Status.NOT_SUCCEEDED, errors__0__class=value)
