"""The API's pagination: ?limit=&offset=, with deep pages read keys first."""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.pagination import LimitOffsetPagination as DRFLimitOffsetPagination
from rest_framework.request import Request
from rest_framework.views import APIView

# Below this offset a plain LIMIT/OFFSET over the joined rows is as fast as anything.
KEYS_FIRST_FROM = 1000


class LimitOffsetPagination(DRFLimitOffsetPagination):
    """?limit=&offset= pages of PAGE_SIZE (50) items; a client may ask for at most 500."""

    max_limit = 500

    def paginate_queryset(
        self, queryset: Any, request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        if not isinstance(queryset, QuerySet) or self.get_offset(request) < KEYS_FIRST_FROM:
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        self.count = self.get_count(queryset)
        self.offset = self.get_offset(request)
        if self.count > self.limit and self.template is not None:
            self.display_page_controls = True
        if self.count == 0 or self.offset > self.count:
            return []
        return page_keys_first(queryset, self.offset, self.limit)


def page_keys_first(queryset: QuerySet[Model], offset: int, limit: int) -> list[Model]:
    """One page of an ordered queryset: the offset is walked over primary keys alone (an
    index-only scan when an index matches the order), then only the page's rows are read
    with their joins. A plain OFFSET would build every skipped row with its joins."""
    keys = list(queryset.values_list("pk", flat=True)[offset : offset + limit])
    rows = {row.pk: row for row in queryset.filter(pk__in=keys)}
    return [rows[key] for key in keys if key in rows]
