"""The watch's Celery tasks: beat sends the pass after each night (every hour at
FEDPROBE_WATCH_MINUTE), and the refresh of GOCDB's downtimes the pass reads when a feed is
set (FEDPROBE_GOCDB_DOWNTIME_URL); each calls one service and nothing else."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError
from django.utils import timezone

from webapp.celery import app
from webapp.sites import downtime_import
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


DOWNTIMES_REFRESH = "fedprobe.downtimes_refresh"


@app.task(
    name=DOWNTIMES_REFRESH,
    # Each pass imports the whole feed again: a failed one (GOCDB unreachable, a database
    # restarting) is simply tried again, and the next beat does it anyway.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=3,
)
def downtimes_refresh() -> int:
    plan = downtime_import.downtimes_refresh(now=timezone.now())
    return 0 if plan is None else len(plan.lines)
