"""Finished runs (made in the database: the measurement is not the point) and archivers of
the tests' receivers; the HTTP receiver is the notifications' (a real server on loopback)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from tests.webapp.factories import RunFactory
from tests.webapp.notifications.conftest import HttpReceiver, http_receiver
from webapp.archivers.models import Archiver
from webapp.archivers.outbox import PumpOutcome, archivers_pump
from webapp.archivers.services import archiver_save
from webapp.campaigns.models import Run

__all__ = ["http_receiver"]
TOKEN = "Bearer archive-s3cr3t-0123456789abcdef"
ENDPOINT_TOKEN = "endpoint-t0ken-fedcba9876543210"
QUICK_RETRIES = [{"attempts": 2, "wait_s": 5}]


def finished_run(**fields: Any) -> Run:
    """A run that ended now, measured, against an endpoint with a stored credential."""
    now = timezone.now()
    values: dict[str, Any] = {
        "status": Run.Status.SUCCEEDED,
        "started_at": now - timedelta(seconds=3),
        "finished_at": now,
        "wall_s": 3.0,
        "throughput_mbps": 812.5,
        "bytes_read": 1 << 20,
    }
    run: Run = RunFactory(**{**values, **fields})
    run.endpoint.credential_kind, run.endpoint.credential = "token", ENDPOINT_TOKEN
    run.endpoint.save()
    return run


def http_archiver(receiver: HttpReceiver, **values: Any) -> Archiver:
    """An archiver POSTing to `receiver`, made a minute ago (runs finished since: its own)."""
    chosen = {
        "name": f"http-{Archiver.objects.count()}",
        "kind": "http",
        "url": receiver.url,
        "headers": {"Authorization": TOKEN},
        "retry_policy": QUICK_RETRIES,
        "timeout_s": 1.0,
        **values,
    }
    return archiver_save(values=chosen, now=timezone.now() - timedelta(minutes=1))


def pump(at: datetime | None = None) -> PumpOutcome:
    return archivers_pump(clock=lambda: at or timezone.now())
