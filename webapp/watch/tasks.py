"""The watch's Celery task: beat sends it after each night (every hour at
FEDPROBE_WATCH_MINUTE); it calls the pass and nothing else."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError
from django.utils import timezone

from webapp.celery import app
from webapp.watch.evaluate import watch_evaluate

WATCH = "fedprobe.watch"


@app.task(
    name=WATCH,
    # The pass is idempotent: a database that is restarting is simply tried again.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def watch() -> int:
    return len(watch_evaluate(now=timezone.now()).changes)
