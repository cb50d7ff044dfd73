"""Series as the watch reads them: a series' identity (endpoint, vantage point, parameter
set) and its nights' rollup rows, read as light tuples (a year of a federation is millions of
rows: no model instances)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from django.conf import settings

from webapp.watch.models import SeriesNight
from webapp.watch.rollups import SERIES_FIELDS


@dataclass(frozen=True)
class SeriesId:
    """A series of rollup rows: one endpoint, vantage point and parameter set."""

    endpoint_id: int
    vantage_point_id: int
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int

    def key(self, metric: str) -> str:
        """The regression key of one of its metrics ("availability", a run metric)."""
        return (
            f"series:{self.endpoint_id}:{self.vantage_point_id}:{self.method}:{self.pattern}:"
            f"{self.read_size}:{self.fraction:g}:{self.clients}:{metric}"
        )

    @property
    def subject(self) -> dict[str, object]:
        return {f: getattr(self, f) for f in SERIES_FIELDS}


class NightRow(NamedTuple):
    """One SeriesNight's figures, as the pass reads them."""

    night: date
    runs: int
    succeeded: int
    partial: int
    failed: int
    tester_faults: int
    errors: dict[str, int]
    metrics: dict[str, dict[str, Any]]
    server_versions: list[str]


Histories = dict[SeriesId, list[NightRow]]


def series_nights_read(
    *, first: date, last: date, endpoints: Sequence[int] | None = None
) -> Histories:
    """Each series' rows from `first` to `last` (of `endpoints`' series), in night order,
    with the watched metrics only."""
    rows: Histories = defaultdict(list)
    window = SeriesNight.objects.filter(night__gte=first, night__lte=last)
    if endpoints is not None:
        window = window.filter(endpoint_id__in=endpoints)
    fields = (*SERIES_FIELDS, *NightRow._fields)
    watched = settings.FEDPROBE_WATCH_METRICS
    for values in window.order_by("night").values_list(*fields).iterator(chunk_size=10000):
        series = SeriesId(*values[: len(SERIES_FIELDS)])
        row = NightRow(*values[len(SERIES_FIELDS) :])
        metrics = {m: row.metrics[m] for m in watched if m in row.metrics}
        rows[series].append(row._replace(metrics=metrics))
    return rows


def vantage_point_nights(*, first: date, last: date) -> dict[int, list[date]]:
    """The nights each vantage point measured anything on, from `first` to `last`."""
    nights: dict[int, list[date]] = defaultdict(list)
    pairs = (
        SeriesNight.objects.filter(night__gte=first, night__lte=last)
        .values_list("vantage_point_id", "night")
        .distinct()
        .order_by("night")
    )
    for point, night in pairs:
        nights[point].append(night)
    return nights
