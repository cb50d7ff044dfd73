"""The per-database SQL fragments give the same answers on PostgreSQL and SQLite (this file
runs on both: marker `sqlite`, bin/test's SQLite stage)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection

from tests.webapp.factories import RunFactory
from webapp.campaigns.models import Run
from webapp.core import sql
from webapp.dashboards.models import MatrixThreshold

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

VALUES = "(SELECT 1.0 AS v UNION ALL SELECT 2.0 UNION ALL SELECT 3.0 UNION ALL SELECT 10.0) t"


def _one(query: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(query, params or [])
        return cursor.fetchone()[0]


def test_median_is_percentile_cont_on_postgresql_and_the_mean_elsewhere() -> None:
    found = _one(f"SELECT {sql.median('t.v', where='t.v > 1')} FROM {VALUES}")
    assert float(found) == (3.0 if sql.has_percentile_cont() else 5.0)


def test_days_before_counts_back_whole_days() -> None:
    day = "CAST(%s AS date)" if sql.is_postgresql() else "%s"
    found = _one(f"SELECT {sql.days_before(day, 7)}", ["2026-03-03"])
    assert str(found) == "2026-02-24"


def test_json_first_reads_a_key_of_the_first_error_and_null_without_errors() -> None:
    failed = RunFactory(
        errors=[{"class": "timeout", "message": "no answer"}, {"class": "other", "message": ""}]
    )
    clean = RunFactory(errors=[])
    query = f"SELECT {sql.json_first('errors', 'class')} FROM {Run._meta.db_table} WHERE id = %s"
    assert _one(query, [failed.pk]) == "timeout"
    assert _one(query, [clean.pk]) is None


def test_json_first_refuses_keys_that_are_not_names() -> None:
    with pytest.raises(ValueError, match="JSON key"):
        sql.json_first("errors", "class'; --")


def test_left_keeps_the_first_characters() -> None:
    assert _one(f"SELECT {sql.left('%s', 4)}", ["fedprobe"]) == "fedp"


@pytest.mark.parametrize(
    "value",
    ["2026-03-03 10:20:30", "2026-03-03T10:20:30+00:00", datetime(2026, 3, 3, 10, 20, 30)],
)
def test_aware_datetime_reads_raw_timestamps_as_utc(value: str | datetime) -> None:
    assert sql.aware_datetime(value) == datetime(2026, 3, 3, 10, 20, 30, tzinfo=UTC)


def test_aware_datetime_keeps_none() -> None:
    assert sql.aware_datetime(None) is None


def test_insert_rows_writes_every_row_with_its_timestamps() -> None:
    saved_at = datetime(2026, 3, 3, 10, 20, 30, tzinfo=UTC)
    sql.insert_rows(
        table=MatrixThreshold._meta.db_table,
        columns=["metric", "good", "bad", "saved_at"],
        rows=[("wall_s", 1.0, 5.0, saved_at), ("open_s", 0.5, 2.0, saved_at)],
    )
    rows = MatrixThreshold.objects.order_by("metric").values_list("metric", "bad", "saved_at")
    assert list(rows) == [("open_s", 2.0, saved_at), ("wall_s", 5.0, saved_at)]
