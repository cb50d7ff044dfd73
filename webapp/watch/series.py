"""Series as the watch reads them: a series' identity (endpoint, vantage point, parameter
set) and its nights' rollup rows, read as light tuples (a year of a federation is millions of
rows: no model instances)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection

from webapp.core import sql
from webapp.watch.models import SeriesNight
from webapp.watch.rollups import SERIES_FIELDS

# A watched metric's figures on one night: (median, MAD, runs).
Figures = tuple[float, float, int]


@dataclass(frozen=True)
class SeriesId:
    """A series of rollup rows: one endpoint, vantage point and parameter set."""

    endpoint_id: int
    vantage_point_id: int
    operation: str
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    address_family: str = "any"

    def key(self, metric: str) -> str:
        """The regression key of one of its metrics ("availability", a run metric). A read's
        key over any family is as it was before there were other operations and pinned
        families (its regressions keep theirs); another operation's says it with the method
        ("write+direct"), a pinned family after it ("direct@6")."""
        method = self.method if self.operation == "read" else f"{self.operation}+{self.method}"
        if self.address_family != "any":
            method = f"{method}@{self.address_family}"
        return (
            f"series:{self.endpoint_id}:{self.vantage_point_id}:{method}:{self.pattern}:"
            f"{self.read_size}:{self.fraction:g}:{self.clients}:{metric}"
        )

    @property
    def subject(self) -> dict[str, object]:
        return {f: getattr(self, f) for f in SERIES_FIELDS}


class NightRow(NamedTuple):
    """One SeriesNight's figures, as the pass reads them (its dicts and lists may be shared
    with other rows: read them, never change them)."""

    night: date
    runs: int
    succeeded: int
    partial: int
    failed: int
    tester_faults: int
    errors: dict[str, int]
    metrics: dict[str, Figures]  # the watched ones that night measured
    server_versions: list[str]
    client_versions: list[str]


Histories = dict[SeriesId, list[NightRow]]
# What the detector reads of a night's metric.
DETECTED = ("median", "mad", "n")
COUNTS = ("runs", "succeeded", "partial", "failed", "tester_faults")


def series_nights_read(
    *, first: date, last: date, endpoints: Sequence[int] | None = None
) -> Histories:
    """Each series' rows from `first` to `last` (of `endpoints`' series), in night order,
    with the watched metrics' median, MAD and runs only. Read as plain tuples in one query:
    the watched figures as numbers (decoding each row's whole metrics JSON would cost most of
    a pass), errors and versions decoded once per distinct value (a night's are mostly the
    same as the night before's)."""
    watched = list(settings.FEDPROBE_WATCH_METRICS)
    figures = ", ".join(
        sql.json_number("metrics", metric, part) for metric in watched for part in DETECTED
    )
    where = "night >= %s AND night <= %s"
    parameters: list[Any] = [first, last]
    if endpoints is not None:
        where += f" AND endpoint_id IN ({', '.join(['%s'] * len(endpoints))})"
        parameters += list(endpoints)
    statement = (
        f"SELECT {', '.join(SERIES_FIELDS)}, night, {', '.join(COUNTS)}, "
        f"{sql.json_text('errors')}, {sql.json_text('server_versions')}, "
        f"{sql.json_text('client_versions')}, {figures} "
        f"FROM {SeriesNight._meta.db_table} WHERE {where} ORDER BY night"
    )
    rows: Histories = defaultdict(list)
    series_of: dict[tuple[Any, ...], SeriesId] = {}
    decoded: dict[str, Any] = {}
    nights: dict[Any, date] = {}
    width = len(SERIES_FIELDS)
    slots = [(metric, width + 9 + i * 3) for i, metric in enumerate(watched)]
    with connection.cursor() as cursor:
        cursor.execute(statement, parameters)
        fetched = cursor.fetchall()
        for row in fetched:
            key = row[:width]
            series = series_of.get(key)
            if series is None:
                series = series_of[key] = SeriesId(*key)
            night = nights.get(row[width])
            if night is None:
                night = nights[row[width]] = _date(row[width])
            runs, succeeded, partial, failed, tester_faults = row[width + 1 : width + 6]
            errors, servers, clients = row[width + 6 : width + 9]
            metrics = {
                metric: (row[at], row[at + 1] or 0.0, int(row[at + 2]))
                for metric, at in slots
                if row[at] is not None
            }
            rows[series].append(
                NightRow(
                    night,
                    runs,
                    succeeded,
                    partial,
                    failed,
                    tester_faults,
                    _decoded(decoded, errors, {}),
                    metrics,
                    _decoded(decoded, servers, []),
                    _decoded(decoded, clients, []),
                )
            )
    return rows


def _date(value: date | str) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value  # SQLite's text


def _decoded(cache: dict[str, Any], text: str | None, empty: Any) -> Any:
    if text is None:
        return empty
    if text not in cache:
        cache[text] = json.loads(text)
    return cache[text]


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
