"""Query-parameter filters of the API (the same names the pages use for permalinks)."""

from __future__ import annotations

import django_filters

from webapp.campaigns.models import Run


class RunFilter(django_filters.FilterSet):
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
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
