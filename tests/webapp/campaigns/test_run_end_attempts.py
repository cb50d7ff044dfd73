"""A run that ends before its clients report leaves none of its attempts `running`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webapp.factories import RunFactory, TestFileFactory
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import run_claim, run_execute, run_fail, run_ingest

pytestmark = pytest.mark.django_db


def test_a_run_refused_in_preflight_fails_its_attempts_with_the_runs_error() -> None:
    # Nothing listens on port 1: the preflight is refused before any client starts.
    test_file = TestFileFactory(endpoint__base_url="root://127.0.0.1:1", path="/none")
    run = RunFactory(test_file=test_file, clients=3, deadline_s=10)
    run_execute(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    attempts = list(run.attempts.all())
    assert len(attempts) == 3
    assert {a.status for a in attempts} == {ClientAttempt.Status.FAILED}
    assert {a.error_class for a in attempts} == {run.errors[0]["class"]}
    assert all(a.finished_at is not None for a in attempts)


def test_run_fail_ends_the_open_attempts() -> None:
    run = RunFactory(clients=2)
    run_claim(run_id=run.pk, worker="w")
    assert run_fail(run_id=run.pk, message="bad parameters", error_class="invalid") is True
    assert run_fail(run_id=run.pk, message="again") is False
    attempts = list(ClientAttempt.objects.filter(run=run))
    assert {(a.status, a.error_class, a.error_message) for a in attempts} == {
        (ClientAttempt.Status.FAILED, "invalid", "bad parameters")
    }


def test_a_run_cancelled_before_release_cancels_its_attempts() -> None:
    run = RunFactory(clients=2)
    run_claim(run_id=run.pk, worker="w")
    cancelled: dict[str, Any] = {"status": "cancelled", "errors": [], "clients": []}
    assert run_ingest(run_id=run.pk, run_json=cancelled) is True
    assert set(ClientAttempt.objects.filter(run=run).values_list("status", "error_class")) == {
        (ClientAttempt.Status.CANCELLED, "cancelled")
    }
