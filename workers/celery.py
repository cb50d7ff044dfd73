"""The Celery app: `celery -A workers worker -Q vantage.NAME` measures from vantage point NAME,
`celery -A workers beat` runs the schedule. Configured from the CELERY_* Django settings.

Imported by the web application only to send (workers.dispatch); `workers/__init__.py` does
not import it, so the engine and the lab load without Celery or Django.
"""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.process import AuthenticationString
from pathlib import Path
from typing import Any

from celery import Celery
from celery.beat import PersistentScheduler
from celery.signals import worker_init, worker_process_init

from workers.engine.credentials import remove_stale_run_dirs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("fedprobe", include=["workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")


class Scheduler(PersistentScheduler):
    """Celery's default scheduler, which also creates the folder of its schedule file (with
    DATABASE_URL and a broker URL set, nothing else creates VAR_DIR)."""

    def setup_schedule(self) -> None:
        Path(self.schedule_filename).parent.mkdir(parents=True, exist_ok=True)
        super().setup_schedule()


@worker_process_init.connect
def _let_pool_processes_start_clients(**kwargs: Any) -> None:
    # billiard makes each pool process the stdlib's current process too, as a daemon (which
    # multiprocessing forbids to have children) holding billiard's authkey (which the fork
    # server refuses to pickle). The engine starts one stdlib process per client and ends
    # them itself, by its deadline.
    process = multiprocessing.current_process()
    process.daemon = False
    process._config["authkey"] = AuthenticationString(process.authkey)


@worker_init.connect
def _remove_credentials_of_killed_workers(**kwargs: Any) -> None:
    # A worker killed with kill -9 mid-run left its runs' private folders (their 0600
    # credential files) behind; every run also removes leftovers before it starts.
    remove_stale_run_dirs()
