"""The archivers' Celery task, on the `notify` queue (messages that leave fedprobe): beat
runs it every FEDPROBE_ARCHIVE_PUMP_S. Retries are the deliveries' own (next_attempt_at, in
their rows, from each archiver's retry policy), so that they survive a worker restart; the
task itself is idempotent."""

from __future__ import annotations

import dataclasses

from django.db import InterfaceError, OperationalError
from django.utils import timezone

from webapp.archivers.outbox import archivers_pump
from webapp.celery import app

ARCHIVE_PUMP = "fedprobe.archive_pump"


@app.task(
    name=ARCHIVE_PUMP,
    # Every step claims what it does: a pass tried again sends nothing twice.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def archive_pump() -> dict[str, object]:
    outcome = archivers_pump(clock=timezone.now)
    # The worker's log line: what the pass did (a count of the delivered: a backfill's pass
    # delivers thousands; the ids of those retried or failed, to look up).
    return {**dataclasses.asdict(outcome), "delivered": len(outcome.delivered)}
