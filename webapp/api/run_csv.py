"""The run list as CSV, streamed: a year of runs is written in batches, never held whole.

No secrets: endpoint URLs lose their user:password@, error messages are redacted (an
endpoint's answer may quote a URL with a token), and credentials are not columns. Cells a
spreadsheet would run as a formula (=, +, -, @) are quoted with a leading apostrophe.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from rest_framework.renderers import BaseRenderer

from webapp.campaigns.filters import with_first_error
from webapp.campaigns.models import Run
from webapp.campaigns.run_table import without_secrets, without_userinfo

# (header, value): the run list's columns first, then the run's parameters and times.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"),
    ("status", "status"),
    ("error_class", "error_class"),
    ("error_message", "error_message"),
    ("wall_s", "wall_s"),
    ("throughput_mbps", "throughput_mbps"),
    ("endpoint", "endpoint__name"),
    ("endpoint_url", "endpoint__base_url"),
    ("vantage_point", "vantage_point__name"),
    ("campaign", "campaign__name"),
    ("operation", "operation"),
    ("method", "method"),
    ("pattern", "pattern"),
    ("read_size", "read_size"),
    ("fraction", "fraction"),
    ("clients", "clients"),
    ("address_family", "address_family"),
    ("trigger", "trigger"),
    ("created_at", "created_at"),
    ("started_at", "started_at"),
    ("finished_at", "finished_at"),
)
BATCH_ROWS = 2000
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class CSVRenderer(BaseRenderer):
    """text/csv for content negotiation (Accept: text/csv, ?format=csv); the rows are
    streamed by run_csv_lines, this renders only what else a request may answer (a 400)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["field", "error"])
        for field, errors in (data or {}).items():
            for error in errors if isinstance(errors, list) else [errors]:
                writer.writerow([field, str(error)])
        return out.getvalue().encode()


def run_csv_lines(runs: QuerySet[Run]) -> Iterator[str]:
    """The runs, in their order, as CSV text in batches of BATCH_ROWS rows."""
    rows = with_first_error(runs).values_list(*(value for _, value in COLUMNS))
    yield from _batches([[header for header, _ in COLUMNS]])
    yield from _batches(rows.iterator(chunk_size=BATCH_ROWS))


def _batches(rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    out = io.StringIO()
    writer = csv.writer(out)
    for count, row in enumerate(rows, start=1):
        cells = zip(COLUMNS, row, strict=True)
        writer.writerow([_cell(header, value) for (header, _), value in cells])
        if count % BATCH_ROWS == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    if out.tell():
        yield out.getvalue()


def _cell(header: str, value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if not isinstance(value, str):
        return value
    value = without_userinfo(value) if header == "endpoint_url" else without_secrets(value)
    return f"'{value}" if value.startswith(FORMULA_START) else value
