"""Celery tasks: each takes ids, calls one service and declares its retry policy.

Registered under the names of webapp/campaigns/dispatch.py (`fedprobe.measure_run`, ...), not
under their module path: messages already queued and the beat schedule name those.
"""

from __future__ import annotations

from celery import Task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from webapp.campaigns import cleanups, schedules, services
from webapp.campaigns.dispatch import (
    CLEANUP_RUN,
    LAUNCH_DUE_CAMPAIGNS,
    MEASURE_RUN,
    REAP_RUNS,
    RESEND_RUNS,
)
from webapp.celery import app
from workers.engine.params import MAX_TIMEOUT_S

# The engine ends a run by its deadline (at most MAX_TIMEOUT_S after a bounded preflight);
# this only catches a worker stuck past it. The run is then ended by the reaper.
MEASURE_TIME_LIMIT_S = MAX_TIMEOUT_S + 900


@app.task(
    bind=True,
    name=MEASURE_RUN,
    # Never retried (a re-run skews timing): acked once it ran, not requeued if the worker
    # process dies; a redelivered message finds its run claimed and does nothing.
    acks_late=True,
    reject_on_worker_lost=False,
    time_limit=MEASURE_TIME_LIMIT_S,
)
def measure_run(self: Task[[int], None], run_id: int) -> None:
    services.run_execute(run_id=run_id, worker=self.request.hostname or "unknown")


@app.task(
    name=REAP_RUNS,
    # Idempotent, so a database that is restarting is simply tried again.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def reap_runs() -> int:
    return services.runs_reap()


@app.task(
    name=CLEANUP_RUN,
    # Deletes only the run's own names, so doing it twice is harmless: tried again when the
    # database is restarting.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def cleanup_run(run_id: int) -> list[str]:
    return cleanups.run_cleanup(run_id=run_id)


@app.task(
    name=LAUNCH_DUE_CAMPAIGNS,
    # A slot is claimed by a unique row: trying again launches nothing twice.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def launch_due_campaigns() -> list[int]:
    return [launch.pk for launch in schedules.campaigns_launch_due(now=timezone.now())]


@app.task(
    name=RESEND_RUNS,
    # Each resend is a conditional update: trying again sends nothing twice.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def resend_runs() -> dict[str, list[int]]:
    outcome = services.runs_resend_stale(now=timezone.now())
    return {"resent": outcome.resent, "failed": outcome.failed}
