"""The notifications' Celery task, on its own queue (`notify`): beat runs it every
FEDPROBE_NOTIFY_PUMP_S. Retries are the deliveries' own (next_attempt_at, in their rows),
so that they survive a worker restart; the task itself is idempotent."""

from __future__ import annotations

import dataclasses

from django.db import InterfaceError, OperationalError
from django.utils import timezone

from webapp.celery import app
from webapp.notifications.outbox import notifications_pump

NOTIFY_PUMP = "fedprobe.notify_pump"


@app.task(
    name=NOTIFY_PUMP,
    # Every step claims what it does: a pass tried again sends nothing twice.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def notify_pump() -> dict[str, object]:
    outcome = notifications_pump(clock=timezone.now)
    return dataclasses.asdict(outcome)  # the worker's log line: what the pass did
