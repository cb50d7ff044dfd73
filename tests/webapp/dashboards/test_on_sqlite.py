"""The dashboards' selector tests, run again on the embedded SQLite default (the database a
new user meets first): every SQLite half of webapp.core.sql and of the selectors that ask it
(matrix, alerts, compare, results, the home page) runs in a test. The site summary and the
thresholds run their own files again (test_site_summary.py, test_thresholds.py); the series
API, which reads campaigns.selectors.endpoint_series, does too (tests/webapp/api/test_series.py)."""

from __future__ import annotations

from pathlib import Path

from tests.webapp.sqlite import pytest_on_sqlite

SELECTOR_TESTS = (
    "tests/webapp/core/test_sql.py",
    "tests/webapp/dashboards/test_matrix.py",
    "tests/webapp/dashboards/test_alerts.py",
    "tests/webapp/dashboards/test_compare.py",
    "tests/webapp/dashboards/test_results_selectors.py",
    "tests/webapp/dashboards/test_results_views.py",
    "tests/webapp/dashboards/test_home.py",
    # Tester faults kept out of every endpoint figure, and the predicate's SQL (json_first).
    "tests/webapp/dashboards/test_tester_faults.py",
    "tests/webapp/campaigns/test_tester_fault_predicate.py",
    "tests/webapp/watch/test_availability.py",
)


def test_dashboard_selectors_on_the_embedded_sqlite_database(tmp_path: Path) -> None:
    output = pytest_on_sqlite(tmp_path, *SELECTOR_TESTS)
    # Only the two comparisons with PostgreSQL's percentile_cont have nothing to compare with.
    assert " passed, 2 skipped" in output and "failed" not in output
