"""Sending work to the workers by task name, so services never import task modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webapp.celery import app

if TYPE_CHECKING:
    from webapp.campaigns.models import Run

MEASURE_RUN = "fedprobe.measure_run"
REAP_RUNS = "fedprobe.reap_runs"
LAUNCH_DUE_CAMPAIGNS = "fedprobe.launch_due_campaigns"
RESEND_RUNS = "fedprobe.resend_runs"
CLEANUP_RUN = "fedprobe.cleanup_run"


def enqueue_run(run: Run, *, countdown_s: float | None = None) -> None:
    """Send a committed, queued run to the queue of its vantage point (to be taken no sooner
    than `countdown_s` from now, if given: a run that must wait its turn)."""
    app.send_task(MEASURE_RUN, args=[run.pk], queue=run.vantage_point.queue, countdown=countdown_s)


def enqueue_cleanup(run: Run) -> None:
    """Ask a worker of the run's vantage point (where its clients ran, and its credential
    and egress policy hold) to delete what the run wrote (cleanups.run_cleanup)."""
    app.send_task(CLEANUP_RUN, args=[run.pk], queue=run.vantage_point.queue)
