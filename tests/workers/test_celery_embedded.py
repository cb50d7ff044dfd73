"""The embedded default: no DATABASE_URL, no broker URL. SQLite and kombu's filesystem broker
in VAR_DIR, with a real worker process measuring what another process launched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.celery_worker import REPO, WorkerProcess

LAUNCH_AND_WAIT = """
import json, time
import django
django.setup()
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.sites.models import Endpoint
from webapp.sites.services import vantage_point_local
from webapp.celery import app

ping = app.control.ping(timeout=3)
campaign = Campaign.objects.create(
    name="embedded", methods=["direct"], patterns=["random"], read_sizes=[65536],
    fractions=[0.1], clients=[2],
)
campaign.endpoints.set([Endpoint.objects.get(name="local-root")])
campaign.vantage_points.set([vantage_point_local()])
launched = campaign_launch(campaign=campaign, trigger="manual")
runs = Run.objects.filter(pk__in=[run.pk for run in launched])
deadline = time.monotonic() + 60
while runs.exclude(status__in=Run.FINAL).exists() and time.monotonic() < deadline:
    time.sleep(0.2)
print(json.dumps({"ping": ping, "runs": list(runs.values("status", "worker", "errors"))}))
"""


@pytest.fixture
def embedded_env(tmp_path: Path) -> dict[str, str]:
    """Environment with nothing configured but a VAR_DIR of the test's own."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "FEDPROBE_BROKER_URL"}}
    env |= {"DJANGO_SETTINGS_MODULE": "webapp.settings", "FEDPROBE_VAR_DIR": str(tmp_path / "var")}
    return env


@pytest.fixture
def embedded_worker(embedded_env: dict[str, str], tmp_path: Path) -> Iterator[WorkerProcess]:
    """A real worker on the embedded broker and database, measuring from vantage point local."""
    manage(embedded_env, "migrate", "--noinput")
    worker = WorkerProcess(
        "embedded", ["vantage.local", "control"], embedded_env, tmp_path / "worker.log"
    )
    try:
        yield worker.start().wait_ready()
    finally:
        worker.stop()


def manage(env: dict[str, str], *args: str, script: str | None = None) -> str:
    argv = [sys.executable, "-c", script] if script else [sys.executable, "manage.py", *args]
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_embedded_broker_carries_runs_between_processes(
    lab: Any, embedded_env: dict[str, str], embedded_worker: WorkerProcess
) -> None:
    manage(embedded_env, "lab", "register", "--dir", str(lab.state_dir))
    outcome = json.loads(manage(embedded_env, script=LAUNCH_AND_WAIT))
    assert outcome["ping"] == [{embedded_worker.hostname: {"ok": "pong"}}]
    assert outcome["runs"] == [
        {"status": "succeeded", "worker": embedded_worker.hostname, "errors": []}
    ]
    assert "Connected to filesystem://" in embedded_worker.log()
    var = Path(embedded_env["FEDPROBE_VAR_DIR"])
    assert (var / "fedprobe.sqlite3").exists() and (var / "broker" / "queues").is_dir()
