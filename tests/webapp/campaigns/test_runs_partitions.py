"""Monthly partitions of a runs table partitioned on created_at (docs/deployment.md, "Hourly
probes: the runs table by month"): this month's and the next ones are created once, a run
of a month without a partition is refused, a detached month leaves the parent, and on the
ordinary (unpartitioned) runs table, on PostgreSQL or SQLite, the command says so and changes
nothing."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from webapp.campaigns import partitions

TABLE = "test_runs_by_month"
NOW = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


@pytest.fixture
def by_month() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {TABLE} (id bigint NOT NULL, created_at timestamptz NOT NULL, "
            "PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)"
        )
    return TABLE


def insert(table: str, created_at: datetime) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} VALUES (1, %s)", [created_at])


def rows_of(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db
def test_this_month_and_the_next_ones_are_created_once(by_month: str) -> None:
    created = partitions.runs_partitions_create(now=NOW, ahead=2, table=by_month)

    names = [f"{TABLE}_y2026m11", f"{TABLE}_y2026m12", f"{TABLE}_y2027m01"]
    assert [p.name for p in created] == names
    assert partitions.runs_partitions(table=by_month) == names
    assert partitions.runs_partitions_create(now=NOW, ahead=2, table=by_month) == []
    with connection.cursor() as cursor:  # the parent's key, on each month
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", [names[0]])
        assert [row[0].split(" USING ")[1] for row in cursor.fetchall()] == [
            "btree (id, created_at)"
        ]


@pytest.mark.django_db
def test_a_run_goes_to_its_month_and_one_of_a_month_without_partition_is_refused(
    by_month: str,
) -> None:
    partitions.runs_partitions_create(now=NOW, ahead=1, table=by_month)
    insert(by_month, datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert rows_of(f"{TABLE}_y2026m12") == 1

    with pytest.raises(DatabaseError, match="no partition"), transaction.atomic():
        insert(by_month, datetime(2027, 1, 1, tzinfo=UTC))
    assert rows_of(by_month) == 1


@pytest.mark.django_db
def test_a_detached_month_is_a_table_of_its_own_and_its_runs_leave_the_parent(
    by_month: str,
) -> None:
    partitions.runs_partitions_create(now=NOW, ahead=1, table=by_month)
    insert(by_month, datetime(2026, 11, 2, tzinfo=UTC))
    insert(by_month, datetime(2026, 12, 2, tzinfo=UTC))

    name = partitions.runs_partition_detach(
        month=date(2026, 11, 1), table=by_month, concurrently=False
    )

    assert name == f"{TABLE}_y2026m11"
    assert partitions.runs_partitions(table=by_month) == [f"{TABLE}_y2026m12"]
    assert (rows_of(by_month), rows_of(name)) == (1, 1)
    with pytest.raises(ValueError, match="month: 2026-11 has no partition"):
        partitions.runs_partition_detach(month=date(2026, 11, 1), table=by_month)


@pytest.mark.sqlite
@pytest.mark.django_db
def test_the_command_on_the_ordinary_runs_table_says_it_is_not_partitioned() -> None:
    with pytest.raises(CommandError, match="campaigns_run is not partitioned: nothing to do"):
        call_command("runs_partitions")
    with pytest.raises(CommandError, match="campaigns_run is not partitioned"):
        call_command("runs_partitions", "--detach", "2026-11")

    assert not partitions.is_partitioned()
    assert partitions.runs_partitions() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("argument", "value"), [("--detach", "2026-13"), ("--ahead", "-1"), ("--ahead", "25")]
)
def test_the_command_refuses_a_malformed_argument_naming_it(argument: str, value: str) -> None:
    with pytest.raises(CommandError, match=f"argument {argument}: '{value}' is not"):
        call_command("runs_partitions", argument, value)
