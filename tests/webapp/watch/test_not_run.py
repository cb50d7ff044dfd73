"""Scheduled but not run: runs waiting on a vantage point with no live worker raise a
tester fault naming it and the command that starts its worker, resolved once runs flow."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.webapp.watch.nights import NIGHT_ONE, at, run, series
from webapp.campaigns.models import Run
from webapp.sites.models import WorkerHeartbeat
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db


def queued(vantage_point: str, hours_ago: float) -> Run:
    return run(
        series(vantage_point=vantage_point),
        NIGHT_ONE,
        status=Run.Status.QUEUED,
        trigger=Run.Trigger.SCHEDULE,
        created=NOW - timedelta(hours=hours_ago),
    )


NOW = at(NIGHT_ONE, 6)


def test_runs_waiting_without_a_live_worker_raise_a_tester_fault_with_the_command() -> None:
    queued("remote", hours_ago=3)
    watch_evaluate(now=NOW)
    regression = Regression.objects.get(key="vp:remote:not-run")
    assert regression.state == Regression.State.TESTER_FAULT
    assert regression.vantage_point is not None and regression.vantage_point.name == "remote"
    assert "celery -A webapp worker -Q vantage.remote" in regression.summary
    assert regression.blame["target"] == "vantage-point"


def test_runs_waiting_briefly_or_with_a_live_worker_raise_nothing() -> None:
    queued("remote", hours_ago=1)
    waiting = queued("busy", hours_ago=3)
    WorkerHeartbeat.objects.create(
        hostname="busy@host",
        queue=waiting.vantage_point.queue,
        pid=1,
        started_at=NOW - timedelta(hours=5),
        last_seen=NOW - timedelta(seconds=10),
    )
    watch_evaluate(now=NOW)
    assert not Regression.objects.exists()


def test_not_run_is_resolved_once_runs_flow_again() -> None:
    waiting = queued("remote", hours_ago=3)
    watch_evaluate(now=NOW)
    Run.objects.filter(pk=waiting.pk).update(status=Run.Status.SUCCEEDED)
    watch_evaluate(now=NOW + timedelta(hours=1))
    regression = Regression.objects.get(key="vp:remote:not-run")
    assert regression.state == Regression.State.RESOLVED
    watch_evaluate(now=NOW + timedelta(hours=2))
    assert Regression.objects.count() == 1
