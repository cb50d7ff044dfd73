"""Series as the watch reads them: a series' identity (endpoint, vantage point, parameter
set) and its nights' rollup rows, read as light tuples (a year of a federation is millions of
rows: no model instances)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import FloatField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

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
    metrics: dict[str, dict[str, Any]]  # the watched ones: {"median", "mad", "n"}
    server_versions: list[str]


Histories = dict[SeriesId, list[NightRow]]
# What the detector reads of a night's metric.
DETECTED = ("median", "mad", "n")


def series_nights_read(
    *, first: date, last: date, endpoints: Sequence[int] | None = None
) -> Histories:
    """Each series' rows from `first` to `last` (of `endpoints`' series), in night order,
    with the watched metrics' median, MAD and runs only (read as numbers: decoding each
    row's whole metrics JSON would cost most of a pass)."""
    rows: Histories = defaultdict(list)
    window = SeriesNight.objects.filter(night__gte=first, night__lte=last)
    if endpoints is not None:
        window = window.filter(endpoint_id__in=endpoints)
    watched = list(settings.FEDPROBE_WATCH_METRICS)
    figures = {
        f"m{i}_{part}": Cast(KT(f"metrics__{metric}__{part}"), FloatField())
        for i, metric in enumerate(watched)
        for part in DETECTED
    }
    fields = (*SERIES_FIELDS, *NightRow._fields[:-2], "server_versions", *figures)
    values: Iterator[tuple[Any, ...]] = (
        window.annotate(**figures).order_by("night").values_list(*fields).iterator(10000)
    )
    for row in values:
        series = SeriesId(*row[: len(SERIES_FIELDS)])
        counts = row[len(SERIES_FIELDS) : len(SERIES_FIELDS) + 7]
        versions = row[len(SERIES_FIELDS) + 7]
        numbers = row[len(SERIES_FIELDS) + 8 :]
        metrics = {
            metric: dict(zip(DETECTED, numbers[i * 3 : i * 3 + 3], strict=True))
            for i, metric in enumerate(watched)
            if numbers[i * 3] is not None
        }
        night, runs, succeeded, partial, failed, tester_faults, errors = counts
        rows[series].append(
            NightRow(
                night, runs, succeeded, partial, failed, tester_faults, errors, metrics, versions
            )
        )
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
