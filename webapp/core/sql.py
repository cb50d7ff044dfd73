"""The SQL that differs between the two databases fedprobe runs on: PostgreSQL (production)
and SQLite (the embedded default, what a new user meets first). Each function answers for
the default connection's database, so a selector writes its query once and asks here for the
few fragments that differ; tests run the dashboards' selectors on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime


def is_postgresql() -> bool:
    return bool(connection.vendor == "postgresql")


def has_percentile_cont() -> bool:
    """Whether the database computes percentile_cont (medians, quartiles) itself; elsewhere
    selectors compute them in Python from the ordered values, with the same interpolation."""
    return is_postgresql()


def has_lateral() -> bool:
    """Whether the database joins LATERAL subqueries (SQLite answers the same questions with
    correlated subqueries, read less directly)."""
    return is_postgresql()


def median(expression: str, *, where: str) -> str:
    """The median of `expression` over the group's rows where `where` holds. SQLite has no
    percentile_cont: the mean stands in (a rough figure for the embedded default)."""
    if is_postgresql():
        return f"percentile_cont(0.5) WITHIN GROUP (ORDER BY {expression}) FILTER (WHERE {where})"
    return f"AVG({expression}) FILTER (WHERE {where})"


def days_before(day: str, days: int) -> str:
    """The date `days` days before the date expression `day`."""
    if is_postgresql():
        return f"({day} - {int(days)})"
    return f"date({day}, '-{int(days)} days')"


def json_first(column: str, key: str) -> str:
    """`key` of the first element of the JSON array in `column`, as text (NULL if none)."""
    if not key.isidentifier():
        raise ValueError(f"not a JSON key we write: {key!r}")
    if is_postgresql():
        return f"{column} -> 0 ->> '{key}'"
    return f"json_extract({column}, '$[0].{key}')"


def json_number(column: str, *keys: str) -> str:
    """The number at `keys` in the JSON object in `column`, as a float (NULL if none)."""
    if not all(key.isidentifier() for key in keys):
        raise ValueError(f"not JSON keys we write: {keys!r}")
    if is_postgresql():
        path = " -> ".join(f"'{key}'" for key in keys[:-1])
        return f"({column} -> {path} ->> '{keys[-1]}')::float8"
    return f"json_extract({column}, '$.{'.'.join(keys)}')"


def json_text(column: str) -> str:
    """A JSON column as its text (decoded by the caller, once per distinct value)."""
    return f"{column}::text" if is_postgresql() else column


def left(expression: str, chars: int) -> str:
    """The first `chars` characters of a text expression."""
    if is_postgresql():
        return f"LEFT({expression}, {int(chars)})"
    return f"SUBSTR({expression}, 1, {int(chars)})"


def aware_datetime(value: datetime | str | None) -> datetime | None:
    """A timestamp read by a raw query: SQLite hands them back as text or as naive datetimes
    (in UTC), PostgreSQL as aware datetimes."""
    parsed = parse_datetime(value) if isinstance(value, str) else value
    if parsed is not None and timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def insert_rows(*, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Insert many rows fast, in one transaction: COPY on PostgreSQL, one INSERT executed
    for all the rows elsewhere. JSON values go in as JSON text (json.dumps them first)."""
    names = ", ".join(columns)
    with transaction.atomic(), connection.cursor() as cursor:
        if is_postgresql():
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        adapt = connection.ops.adapt_datetimefield_value
        placeholders = ", ".join(["%s"] * len(columns))
        cursor.executemany(
            f"INSERT INTO {table} ({names}) VALUES ({placeholders})",
            [[adapt(v) if isinstance(v, datetime) else v for v in row] for row in rows],
        )
