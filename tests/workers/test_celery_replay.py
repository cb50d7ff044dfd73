"""A replay through a real Celery worker against the lab (issue 20 item 6): a trace uploaded
through the API, a campaign that replays it made and launched through the API; the worker
writes the trace to the run's private folder (the message carries only the run's id), the
engine replays the recorded job's reads at the same paths on the lab's endpoint, and nothing
of the trace is left on the worker after."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import api_for, user
from tests.workers.test_celery import lab_endpoint, queued_messages, wait_for_final
from webapp.campaigns.models import Run

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).parent / "engine" / "data"
JOB = (DATA / "recorded-job.csv").read_text()  # file-4M then file-1M
# What the recorded job's reads delivered (tests/workers/engine/test_trace.py says which).
RECORDED_BYTES = 4 * 65536 + 28672 + 3 * 131072 + 1048576 + 100
CLIENTS = 2


def test_a_worker_replays_a_trace_uploaded_through_the_api(
    lab: Any, start_celery_worker: Any, celery_broker_url: str, tmp_path: Path
) -> None:
    secrets = tmp_path / "secrets"
    worker: WorkerProcess = start_celery_worker(
        "replay", env={"FEDPROBE_SECRETS_DIR": str(secrets)}
    )
    endpoint = lab_endpoint(lab, "local-root")
    api = api_for(user("olga"))
    trace = api.post("/api/v1/traces/", {"name": "job", "trace": JOB}, format="json")
    assert trace.status_code == 201, trace.content
    body = {
        "name": "replay",
        "endpoints": [endpoint.pk],
        "vantage_points": [_vantage_point("replay")],
        "operations": ["replay"],
        "trace": trace.json()["id"],
        "methods": ["direct"],
        "patterns": ["sequential"],
        "read_sizes": [65536],
        "fractions": [1],
        "clients": [CLIENTS],
        "replay_timing": "recorded",
    }
    made = api.post("/api/v1/campaigns/", body, format="json")
    assert made.status_code == 201, made.content
    worker.stop()  # the message waits in the queue, to be looked at
    launched = api.post(f"/api/v1/campaigns/{made.json()['id']}/launch/", format="json")
    assert launched.status_code in (201, 202), launched.content
    (message,) = queued_messages(celery_broker_url, "vantage.replay")
    sent = base64.b64decode(message["body"])
    assert b"file-4M" not in sent and b"Read" not in sent  # no CSV, only the run's id
    assert len(sent) < 200, sent
    worker = start_celery_worker("replay", env={"FEDPROBE_SECRETS_DIR": str(secrets)})
    (run,) = wait_for_final(list(Run.objects.all()), worker)
    assert run.status == Run.Status.SUCCEEDED, run.errors
    assert run.operation == "replay"
    assert run.bytes_read == CLIENTS * RECORDED_BYTES
    result = run.result or {}
    assert result["params"]["operation"] == "replay"
    assert set(result["latency_us"]) >= {"open", "read", "readv", "async_read", "close", "lag"}
    given = Path(result["params"]["trace"])
    assert given.name == "trace.csv" and given.parent.parent == secrets
    assert list(secrets.iterdir()) == []  # the run's folder, and the trace in it, are gone


def _vantage_point(name: str) -> int:
    from webapp.sites.models import VantagePoint

    return VantagePoint.objects.get_or_create(name=name)[0].pk
