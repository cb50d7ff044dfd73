"""Cancelling a running run over the API, executed by a real worker: every client stops soon,
and the run's figures stay out of aggregates. (A queued run's cancel is in test_api.py, the
service's own cancel path in test_campaign_services.py.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Group, User
from django.utils import timezone
from rest_framework.test import APIClient

from tests.celery_worker import WorkerProcess, wait_until
from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import ClientAttempt, Run

FILE_16M = "/fedprobe/file-16M"
CLIENTS = 4
BANDWIDTH_MBPS = 0.25  # per connection: each client would read its 16.8 MB for ~67 s
CANCEL_BOUND_S = 30  # reliability.md: a cancel stops every client within ~30 s


def operator_client() -> tuple[APIClient, User]:
    user = User.objects.create_user("operator-user", password="x")
    # A transactional test before this one may have flushed the groups migrations made.
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client, user


def test_cancel_of_a_running_run_stops_every_client_and_keeps_it_out_of_series(
    lab: Any, relay_to: Any, celery_worker: WorkerProcess
) -> None:
    operator, user = operator_client()
    _, url = relay_to("local-root", FILE_16M, bandwidth_mbps=BANDWIDTH_MBPS)
    (lab_file,) = [f for f in lab.endpoint("local-root").files if f.path == FILE_16M]
    endpoint = EndpointFactory(base_url=url.split("//fedprobe")[0] + "/")
    TestFileFactory(endpoint=endpoint, path=FILE_16M, size=lab_file.size, adler32=lab_file.adler32)
    campaign = CampaignFactory(
        owner=user,
        endpoints=[endpoint],
        vantage_points=[VantagePointFactory(name="local")],
        patterns=["sequential"],
        read_sizes=[1024 * 1024],
        fractions=[1.0],
        clients=[CLIENTS],
        deadline_s=600,
    )
    natural_s = lab_file.size / (BANDWIDTH_MBPS * 1e6)
    measured = RunFactory(
        test_file=endpoint.default_file, status=Run.Status.SUCCEEDED, throughput_mbps=0.25
    )

    launched = operator.post(f"/api/v1/campaigns/{campaign.pk}/launch/")
    assert launched.status_code == 201, launched.json()
    (run_id,) = launched.json()["runs"]
    attempts = ClientAttempt.objects.filter(run_id=run_id)

    def every_client_reading() -> bool:
        return attempts.filter(bytes_read__gt=0).count() == CLIENTS

    wait_until(every_client_reading, 60, "every client reading", celery_worker)
    cancelled_at = timezone.now()
    answer = operator.post(f"/api/v1/runs/{run_id}/cancel/")
    assert answer.status_code == 202
    assert answer.json()["status"] == "running"  # asked to stop; its worker ends it

    wait_until(
        lambda: Run.objects.get(pk=run_id).status in Run.FINAL, 60, "run final", celery_worker
    )
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.CANCELLED, run.errors
    assert run.finished_at - cancelled_at < timedelta(seconds=CANCEL_BOUND_S)
    assert run.finished_at - run.started_at < timedelta(seconds=natural_s)
    assert list(attempts.values_list("status", flat=True)) == [ClientAttempt.Status.CANCELLED] * 4
    assert all(0 < n < lab_file.size for n in attempts.values_list("bytes_read", flat=True))

    detail = operator.get(f"/api/v1/runs/{run_id}/").json()
    assert (detail["status"], detail["throughput_mbps"]) == ("cancelled", None)
    series = operator.get(
        "/api/v1/series/", {"endpoint": endpoint.pk, "metric": "throughput_mbps"}
    ).json()
    assert [(p["n"], p["mean"]) for p in series[0]["points"]] == [(1, measured.throughput_mbps)]
