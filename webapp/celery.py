"""The Celery app: `celery -A webapp worker -Q vantage.NAME` measures from vantage point NAME,
`celery -A webapp beat` runs the schedule. Configured from the CELERY_* Django settings.

Its tasks are in webapp/campaigns/tasks.py; the web application sends work by task name
(webapp/campaigns/dispatch.py). `webapp/__init__.py` does not import this module, so Django
starts without Celery; `celery -A webapp` finds it as `webapp.celery`.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from celery import Celery
from celery.beat import PersistentScheduler
from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown
from celery.worker import state as worker_state

from workers.engine.credentials import remove_stale_run_dirs
from workers.engine.processes import allow_children_in_pool_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

logger = logging.getLogger(__name__)

app = Celery(
    "fedprobe",
    include=[
        "webapp.campaigns.tasks",
        "webapp.watch.tasks",
        "webapp.notifications.tasks",
        "webapp.archivers.tasks",
    ],
)
app.config_from_object("django.conf:settings", namespace="CELERY")


class Scheduler(PersistentScheduler):
    """Celery's default scheduler, which also creates the folder of its schedule file (with
    DATABASE_URL and a broker URL set, nothing else creates VAR_DIR)."""

    schedule_filename: str  # set by PersistentScheduler.__init__; celery-types omits it

    def setup_schedule(self) -> None:
        Path(self.schedule_filename).parent.mkdir(parents=True, exist_ok=True)
        super().setup_schedule()


@worker_process_init.connect
def _let_pool_processes_start_clients(**kwargs: Any) -> None:
    allow_children_in_pool_process()


@worker_init.connect
def _remove_credentials_of_killed_workers(**kwargs: Any) -> None:
    # A worker killed with kill -9 mid-run left its runs' private folders (their 0600
    # credential files) behind; every run also removes leftovers before it starts.
    remove_stale_run_dirs()


class Heartbeat:
    """A thread of the worker's main process that writes its heartbeat rows
    (webapp.campaigns.health) every FEDPROBE_WORKER_HEARTBEAT_S, so pages know who listens on each
    queue without asking the broker. A thread, not the worker's event loop: a database that
    hangs delays heartbeats, never the consumer."""

    def __init__(self, *, hostname: str, queues: list[str], interval_s: float) -> None:
        self.hostname = hostname
        self.queues = queues
        self.interval_s = interval_s
        self.pid = os.getpid()
        self.started_at = _now()
        self.version = _fedprobe_version()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fedprobe-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and mark the worker stopped (a warm shutdown: it is gone at once)."""
        self._stop.set()
        self._thread.join(timeout=10)
        from webapp.campaigns.health import worker_stopped

        self._with_database(
            lambda: worker_stopped(hostname=self.hostname, pid=self.pid, now=_now())
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            self._with_database(self.beat)
            self._stop.wait(self.interval_s)

    def beat(self) -> None:
        from webapp.campaigns.health import worker_heartbeat

        worker_heartbeat(
            hostname=self.hostname,
            queues=self.queues,
            pid=self.pid,
            version=self.version,
            started_at=self.started_at,
            current_run_id=_current_run_id(),
            now=_now(),
        )

    def _with_database(self, write: Any) -> None:
        # Each beat opens and closes its own connection: pool processes forked meanwhile never
        # inherit an open one, and a database restart costs at most one beat.
        from django.db import connection

        try:
            write()
        except Exception as exc:  # a missed beat is logged; the next one tries again
            logger.warning("worker heartbeat not recorded: %s", exc)
        finally:
            connection.close()


_heartbeats: list[Heartbeat] = []  # this worker's, once it is ready


@worker_ready.connect
def _start_heartbeat(sender: Any, **kwargs: Any) -> None:
    from django.conf import settings

    queues = sorted(queue.name for queue in sender.app.amqp.queues.consume_from.values())
    heartbeat = Heartbeat(
        hostname=sender.hostname, queues=queues, interval_s=settings.FEDPROBE_WORKER_HEARTBEAT_S
    )
    heartbeat.start()
    _heartbeats.append(heartbeat)


@worker_shutdown.connect
def _stop_heartbeat(**kwargs: Any) -> None:
    while _heartbeats:
        _heartbeats.pop().stop()


def _current_run_id() -> int | None:
    """The run the worker's pool process is measuring, from the main process's own state."""
    from webapp.campaigns.dispatch import MEASURE_RUN

    for request in list(worker_state.active_requests):
        if request.name == MEASURE_RUN and request.args:
            return int(request.args[0])
    return None


def _fedprobe_version() -> str:
    try:
        return package_version("fedprobe")
    except PackageNotFoundError:
        return "unknown"


def _now() -> datetime:
    from django.utils import timezone

    return timezone.now()
