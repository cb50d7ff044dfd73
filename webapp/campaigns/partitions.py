"""Monthly partitions of the runs table, for a deployment whose runs table is partitioned by
month on created_at (docs/deployment.md, "Hourly probes: the runs table by month").

Nothing here converts the table: on a runs table that is not partitioned (the default, every
test database, and always on SQLite) `runs_partitions_create` raises NotPartitioned. A
partition holds the runs created from the first of its month (UTC) to the first of the next,
and is named `<table>_yYYYYmMM`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db import connection, transaction

from webapp.campaigns.models import Run
from webapp.core import sql

RUNS_TABLE = Run._meta.db_table
# Months created ahead of the current one: a run created in a month with no partition is
# refused by PostgreSQL (no default partition), so the next months always exist.
MONTHS_AHEAD = 3
LOCK_TIMEOUT_S = 10


class NotPartitioned(Exception):
    """The table is not partitioned: there is nothing to create or detach."""


@dataclass(frozen=True)
class Partition:
    """One month's partition: its name and the month (its first day, UTC)."""

    name: str
    month: date


def month_of(moment: datetime | date) -> date:
    """The first day of the (UTC) month of `moment`."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date()
    return moment.replace(day=1)


def months_after(month: date, count: int) -> date:
    """The first day of the month `count` months after `month` (before, if negative)."""
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def partition_name(month: date, *, table: str = RUNS_TABLE) -> str:
    return f"{table}_y{month.year:04d}m{month.month:02d}"


def is_partitioned(table: str = RUNS_TABLE) -> bool:
    """Whether `table` is partitioned (never on SQLite, which has no partitions)."""
    if not sql.is_postgresql():
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table p JOIN pg_class c "
            "ON c.oid = p.partrelid WHERE c.oid = to_regclass(%s))",
            [table],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def runs_partitions(*, table: str = RUNS_TABLE) -> list[str]:
    """The names of the table's attached partitions, oldest first."""
    if not sql.is_postgresql():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY c.relname",
            [table],
        )
        return [name for (name,) in cursor.fetchall()]


def runs_partition_create(*, month: date, table: str = RUNS_TABLE) -> Partition | None:
    """Create the partition of `month` (its indexes and foreign keys come from the parent);
    None if it exists already."""
    name = partition_name(month, table=table)
    if name in runs_partitions(table=table):
        return None
    with transaction.atomic(), connection.cursor() as cursor:
        # CREATE TABLE ... PARTITION OF would lock the parent ACCESS EXCLUSIVE (every read and
        # insert of a run waits); an empty table attached takes SHARE UPDATE EXCLUSIVE, which
        # they pass. It still waits for DDL on the parent: give up rather than wait long.
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s'")
        cursor.execute(
            f'CREATE TABLE "{name}" (LIKE "{table}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
        )
        cursor.execute(
            f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" FOR VALUES FROM (%s) TO (%s)',
            [_midnight(month), _midnight(months_after(month, 1))],
        )
    return Partition(name, month)


def runs_partitions_create(
    *, now: datetime, ahead: int = MONTHS_AHEAD, table: str = RUNS_TABLE
) -> list[Partition]:
    """Create the partitions of `now`'s month and the `ahead` months after it that are
    missing; returns those created. Raises NotPartitioned on a table that is not."""
    if not is_partitioned(table):
        raise NotPartitioned(f"{table} is not partitioned")
    first = month_of(now)
    created = (
        runs_partition_create(month=months_after(first, n), table=table) for n in range(ahead + 1)
    )
    return [partition for partition in created if partition is not None]


def runs_partition_detach(
    *, month: date, table: str = RUNS_TABLE, concurrently: bool = True
) -> str:
    """Detach the partition of `month`; it stays a table of its own, to dump and drop.
    CONCURRENTLY (outside a transaction only) lets runs be read and written meanwhile.
    Returns its name."""
    if not is_partitioned(table):
        raise NotPartitioned(f"{table} is not partitioned")
    name = partition_name(month, table=table)
    if name not in runs_partitions(table=table):
        raise ValueError(f"month: {month:%Y-%m} has no partition {name}")
    with connection.cursor() as cursor:
        how = " CONCURRENTLY" if concurrently else ""
        cursor.execute(f'ALTER TABLE "{table}" DETACH PARTITION "{name}"{how}')
    return name


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
