"""A running run's attempts record how far each client has read, with each heartbeat."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from tests.webapp.factories import RunFactory
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import run_cancel, run_execute
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint

WAIT_S = 60


@pytest.mark.django_db(transaction=True)
def test_heartbeats_record_each_clients_bytes_while_the_run_runs(lab: Any) -> None:
    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name="near-root")  # 2 ms away: 1 KiB reads take a while
    run = RunFactory(test_file=endpoint.default_file, read_size=1024, fraction=1.0, clients=2)

    def execute() -> None:
        try:
            run_execute(run_id=run.pk, worker="w")
        finally:
            connection.close()  # this thread's own connection

    worker = threading.Thread(target=execute)
    worker.start()
    try:
        seen = _bytes_of_every_client_once_all_moved(run)
        later = _bytes_of_every_client_once_all_moved(run, beyond=seen)
        assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
        assert all(b > a for a, b in zip(seen, later, strict=True))
        assert all(b < endpoint.default_file.size for b in later)
    finally:
        run_cancel(run=run)
        worker.join(timeout=30)
    assert not worker.is_alive()


def _bytes_of_every_client_once_all_moved(run: Run, beyond: list[int] | None = None) -> list[int]:
    floor = beyond or [0] * run.clients
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        attempts = ClientAttempt.objects.filter(run=run, status=ClientAttempt.Status.RUNNING)
        done = list(attempts.order_by("client").values_list("bytes_read", flat=True))
        if len(done) == run.clients and all(b > f for b, f in zip(done, floor, strict=True)):
            return done
        time.sleep(0.1)
    raise AssertionError(f"the clients' bytes did not grow past {floor} in {WAIT_S} s")
