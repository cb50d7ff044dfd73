"""The tester-fault predicate: Run.is_tester_fault, q_tester_fault, q_not_tester_fault and
sql_tester_fault agree, and split the runs in two (docs/watch.md "Tester faults")."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.webapp.dashboards.status_runs import RunMaker, night
from tests.webapp.factories import VantagePointFactory
from webapp.campaigns.models import Run, q_not_tester_fault, q_tester_fault, sql_tester_fault

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status


def first_error(error_class: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"class": error_class, "message": "m", "client": None, **extra}]


# (name, status, errors, is a tester fault)
CASES: list[tuple[str, str, list[dict[str, Any]], bool]] = [
    ("ok", S.SUCCEEDED, [], False),
    ("site-auth", S.FAILED, first_error("auth"), False),
    ("site-timeout", S.TIMEOUT, first_error("timeout"), False),
    ("lost", S.FAILED, first_error("lost"), True),
    ("lost-partial", S.PARTIAL, first_error("lost"), True),
    ("harness", S.FAILED, first_error("harness"), True),
    ("egress", S.FAILED, first_error("egress"), True),
    ("expired-token", S.FAILED, first_error("auth", phase="credential"), True),
    ("issuer-down", S.FAILED, first_error("refused", phase="credential"), True),
    # A tester-fault class behind the endpoint's own first error: the endpoint's failure.
    ("site-then-lost", S.FAILED, first_error("auth") + first_error("lost"), False),
]


@pytest.fixture
def runs() -> dict[str, Run]:
    make = RunMaker()
    endpoint = make.endpoint("faulty")
    vp = VantagePointFactory()
    return {
        name: make.add(endpoint, vp, status, night(1), errors=errors)
        for name, status, errors, _ in CASES
    }


def test_is_tester_fault_names_each_tester_fault_and_no_site_failure(
    runs: dict[str, Run],
) -> None:
    expected = {name for name, *_, fault in CASES if fault}
    assert {name for name, run in runs.items() if run.is_tester_fault} == expected


def test_querysets_split_runs_into_tester_faults_and_the_rest(runs: dict[str, Run]) -> None:
    by_id = {run.pk: name for name, run in runs.items()}
    faults = {by_id[pk] for pk in Run.objects.filter(q_tester_fault()).values_list("pk", flat=True)}
    others = {
        by_id[pk] for pk in Run.objects.filter(q_not_tester_fault()).values_list("pk", flat=True)
    }
    assert faults == {name for name, run in runs.items() if run.is_tester_fault}
    assert others == set(runs) - faults


def test_sql_condition_matches_the_queryset(runs: dict[str, Run]) -> None:
    by_id = {run.pk: name for name, run in runs.items()}
    table = Run._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} WHERE {sql_tester_fault(f'{table}.errors')}")
        found = {by_id[pk] for (pk,) in cursor.fetchall()}
    assert found == {name for name, run in runs.items() if run.is_tester_fault}
