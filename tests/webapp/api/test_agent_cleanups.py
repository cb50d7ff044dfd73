"""A remote vantage point's lost write and copy runs are cleaned up by its agent (issue 20,
item 1): the reaper records the cleanup, the agent asks for it (`POST
/api/v1/agent/cleanups/`) and gets the run's tag, the directories it wrote to and the
credential of the endpoint written to, sealed to its key for that run; it reports what it
deleted (`POST /api/v1/agent/runs/ID/cleanup/`), or why not: tried again after a back-off,
given up after FEDPROBE_CLEANUP_MAX_ATTEMPTS, and shown on the run's page and in the API.
The broker accounts are real (RabbitMQ); the agent deleting real files on the lab after a
kill -9 is tests/workers/test_remote_vantage_point.py's."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from nacl.public import PrivateKey
from rest_framework.test import APIClient

from tests.webapp.factories import EndpointFactory, RunFactory, TestFileFactory, jwt
from webapp.campaigns.models import ClientAttempt, Run, RunCleanup
from webapp.campaigns.services import runs_reap
from webapp.sites.enrolment import vantage_enrolment_start
from webapp.sites.models import Endpoint, VantagePoint
from workers.agent.api import AgentApi
from workers.agent.config import AgentConfig, HostSettings
from workers.agent.runner import clean_up, clean_up_due
from workers.agent.sealing import Sealed, encode_key, new_private_key, open_sealed, seal
from workers.engine.egress import EgressPolicy

pytestmark = pytest.mark.django_db

CLEANUPS = "/api/v1/agent/cleanups/"


def agent(name: str) -> tuple[APIClient, VantagePoint, PrivateKey]:
    """An enrolled agent's API client (its token set, also as `client.agent_token`), its
    vantage point and its key."""
    key = new_private_key()
    _, token = vantage_enrolment_start(name=name, now=timezone.now())
    client = APIClient()
    answer = client.post(
        "/api/v1/agent/enrol/",
        {"token": token, "public_key": encode_key(key.public_key)},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    agent_token = answer.json()["agent_token"]
    client.credentials(HTTP_AUTHORIZATION=f"Agent {agent_token}")
    client.agent_token = agent_token  # type: ignore[attr-defined]
    return client, VantagePoint.objects.get(name=name), key


def token(scope: str) -> str:
    far = timezone.now() + timedelta(days=1)
    return jwt(iss="https://issuer.example", scope=scope, exp=far.timestamp())


def token_endpoint(secret: str, host: str, **fields: Any) -> Endpoint:
    endpoint = EndpointFactory(
        protocol="https",
        base_url=f"https://{host}:8443",
        credential_kind="token",
        credential=secret,
        **fields,
    )
    TestFileFactory(endpoint=endpoint, path="/data/f", size=1024 * 1024)
    return endpoint  # type: ignore[no-any-return]


def lost(vantage_point: VantagePoint, endpoint: Endpoint, **fields: Any) -> Run:
    """A run of `endpoint` whose worker died mid-measurement, ended by the reaper."""
    stale = timezone.now() - timedelta(minutes=5)
    run = RunFactory(
        test_file=endpoint.files.get(),
        vantage_point=vantage_point,
        status=Run.Status.RUNNING,
        started_at=stale,
        **fields,
    )
    ClientAttempt.objects.create(run=run, client=0, heartbeat_at=stale)
    assert runs_reap(stale_after_s=60) == 1
    return Run.objects.get(pk=run.pk)


def cleanup_of(run: Run) -> RunCleanup:
    return RunCleanup.objects.get(run=run)


def test_a_lost_write_is_handed_to_its_agent_sealed_and_done_once_reported(
    central: str, admin_client: Any
) -> None:
    client, vantage_point, key = agent("far")
    other, _, _ = agent("other")
    secret = token("storage.read:/ storage.modify:/scratch")
    endpoint = token_endpoint(secret, "127.0.0.3", scratch_path="/scratch/fedprobe")
    endpoint.credential_hosts = [".pools.example.org"]  # its door redirects there
    endpoint.save()
    run = lost(vantage_point, endpoint, operation="write")
    read = lost(vantage_point, endpoint, operation="read")
    assert not RunCleanup.objects.filter(run=read).exists()  # a read leaves nothing
    cleanup = cleanup_of(run)
    assert (cleanup.status, cleanup.attempts) == ("pending", 0)  # no worker sent it: an agent

    assert other.post(CLEANUPS).json() == {"cleanups": []}  # another vantage point's
    assert other.post(f"/api/v1/agent/runs/{run.pk}/cleanup/", {"deleted": 1}).status_code == 404
    answer = client.post(CLEANUPS)
    assert answer.status_code == 200, answer.content
    assert answer["Cache-Control"] == "no-store"
    assert secret not in answer.content.decode()
    (handed,) = answer.json()["cleanups"]
    assert handed["run"] == run.pk and handed["run_tag"] == run.run_tag
    assert handed["urls"] == ["https://127.0.0.3:8443/scratch/fedprobe/"]
    assert handed["credential_hosts"] == [".pools.example.org"]  # held to them, and no others
    opened = open_sealed(handed["credential"], key, run_id=run.pk, vantage_point="far")
    assert (opened.kind, opened.secret) == ("token", secret)
    assert client.post(CLEANUPS).json() == {"cleanups": []}  # it is held: not handed twice
    assert cleanup_of(run).attempts == 1

    report = f"/api/v1/agent/runs/{run.pk}/cleanup/"
    for bad, field in (
        ({}, "deleted, error"),
        ({"deleted": -1}, "deleted"),
        ({"deleted": True}, "deleted"),
        ({"deleted": "2"}, "deleted"),
        ({"error": "  "}, "error"),
        ({"deleted": 2, "error": "x"}, "deleted, error"),
    ):
        refused = client.post(report, bad, format="json")
        assert refused.status_code == 400, bad
        assert refused.json()["detail"].startswith(field), refused.json()
    assert (cleanup_of(run).status, cleanup_of(run).attempts) == ("pending", 1)  # unchanged
    done = client.post(report, {"deleted": 2}, format="json")
    assert done.json() == {"stored": True}
    assert client.post(report, {"deleted": 2}, format="json").json() == {"stored": False}
    shown = admin_client.get(f"/api/v1/runs/{run.pk}/").json()["cleanup"]
    assert (shown["status"], shown["attempts"], shown["deleted"], shown["error"]) == (
        "done",
        1,
        2,
        None,
    )
    assert admin_client.get(f"/api/v1/runs/{read.pk}/").json()["cleanup"] is None
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-cleanup" data-status="done">done: 2 files it left deleted' in page


def test_a_copys_cleanup_is_at_its_destination_retried_and_given_up_after_n_attempts(
    central: str, admin_client: Any, settings: Any
) -> None:
    settings.FEDPROBE_CLEANUP_MAX_ATTEMPTS = 2
    settings.FEDPROBE_CLEANUP_RETRY_S = 60
    client, vantage_point, key = agent("copier")
    source_token = token("storage.read:/")
    destination_token = token("storage.read:/ storage.modify:/scratch")
    source = token_endpoint(source_token, "127.0.0.2")
    destination = token_endpoint(destination_token, "127.0.0.4", scratch_path="/scratch")
    run = lost(vantage_point, source, operation="tpc-pull", destination_endpoint=destination)
    (handed,) = client.post(CLEANUPS).json()["cleanups"]
    # The copies are at the destination, deleted with its credential, not the source's.
    assert handed["urls"] == ["https://127.0.0.4:8443/scratch/"]
    opened = open_sealed(handed["credential"], key, run_id=run.pk, vantage_point="copier")
    assert opened.secret == destination_token
    report = f"/api/v1/agent/runs/{run.pk}/cleanup/"
    failed = client.post(report, {"error": "auth: permission denied"}, format="json")
    assert failed.json() == {"stored": True}
    cleanup = cleanup_of(run)
    assert (cleanup.status, cleanup.attempts, cleanup.error) == (
        "pending",
        1,
        "auth: permission denied",
    )
    waits_s = (cleanup.due_at - timezone.now()).total_seconds()
    assert 55 < waits_s <= 60  # the back-off: not handed out again before
    assert client.post(CLEANUPS).json() == {"cleanups": []}
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "(attempt 1 of 2); the last attempt failed: auth: permission denied" in page
    RunCleanup.objects.filter(pk=cleanup.pk).update(due_at=timezone.now())  # a minute on
    assert len(client.post(CLEANUPS).json()["cleanups"]) == 1
    client.post(report, {"error": "auth: permission denied again"}, format="json")
    cleanup = cleanup_of(run)
    assert (cleanup.status, cleanup.attempts) == ("gave-up", 2)
    assert client.post(CLEANUPS).json() == {"cleanups": []}
    shown = admin_client.get(f"/api/v1/runs/{run.pk}/").json()["cleanup"]
    assert (shown["status"], shown["attempts"], shown["error"]) == (
        "gave-up",
        2,
        "auth: permission denied again",
    )
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "given up after 2 attempts: auth: permission denied again" in page
    # A success reported late still counts: the files are gone.
    assert client.post(report, {"deleted": 1}, format="json").json() == {"stored": True}
    assert cleanup_of(run).status == "done"


def test_a_cleanup_whose_agent_never_reports_is_given_up_after_n_attempts(
    central: str, settings: Any
) -> None:
    settings.FEDPROBE_CLEANUP_MAX_ATTEMPTS = 2
    client, vantage_point, _ = agent("silent")
    endpoint = token_endpoint(token("storage.modify:/scratch"), "127.0.0.5", scratch_path="/s")
    run = lost(vantage_point, endpoint, operation="write")
    for attempt in (1, 2):
        assert len(client.post(CLEANUPS).json()["cleanups"]) == 1
        assert cleanup_of(run).attempts == attempt
        RunCleanup.objects.filter(run=run).update(due_at=timezone.now())  # its lease ran out
    assert client.post(CLEANUPS).json() == {"cleanups": []}
    cleanup = cleanup_of(run)
    assert (cleanup.status, cleanup.error) == ("gave-up", "its last attempt never reported")


def test_a_credential_that_does_not_parse_fails_the_attempt_on_the_server(central: str) -> None:
    client, vantage_point, _ = agent("broken")
    endpoint = token_endpoint(token("storage.modify:/scratch"), "127.0.0.6", scratch_path="/s")
    run = lost(vantage_point, endpoint, operation="write")
    Endpoint.objects.filter(pk=endpoint.pk).update(credential_kind="x509-proxy")
    assert client.post(CLEANUPS).json() == {"cleanups": []}
    cleanup = cleanup_of(run)
    assert (cleanup.status, cleanup.attempts) == ("pending", 1)
    assert cleanup.error.startswith("credential")


@pytest.mark.django_db(transaction=True)
def test_the_agent_reports_a_box_it_cannot_open_then_deletes_under_its_own_file_roots(
    central: str, live_server: Any, tmp_path: Path, settings: Any
) -> None:
    """The agent's side (workers/agent/runner.py) against the real server: a credential
    sealed for another run does not open, and the agent says so (nothing deleted); handed
    out again, it deletes the run's file in a file:// scratch its host's file roots allow,
    and nothing else."""
    client, vantage_point, key = agent("filer")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    endpoint = EndpointFactory(
        protocol="file", base_url=f"file://{tmp_path}", scratch_path="/scratch"
    )
    TestFileFactory(endpoint=endpoint, path="/data/f")
    run = lost(vantage_point, endpoint, operation="write")
    mine, other = scratch / f"fedprobe-{run.run_tag}-c0-f0", scratch / f"fedprobe-{run.pk}-c0-f0"
    for path in (mine, other):
        path.write_bytes(b"x")
    token = client.agent_token  # type: ignore[attr-defined]
    api = AgentApi(live_server.url, token=token)
    config = AgentConfig(live_server.url, "filer", vantage_point.queue, token, "amqp://x")
    host = HostSettings(EgressPolicy.allowing([]), None, (str(tmp_path),))
    try:
        (handed,) = api.cleanups()
        assert handed.urls == (f"file://{scratch}/",) and handed.credential is None
        stranger = Sealed(run.pk + 1, "filer", "token", "not this run's")
        wrong_box = replace(handed, credential=seal(stranger, vantage_point.public_key))
        clean_up(wrong_box, api=api, config=config, key=key, host=host)
        cleanup = cleanup_of(run)
        assert cleanup.error.startswith(
            f"credential: the sealed credential is for run {run.pk + 1}"
        )
        assert "not this run's" not in cleanup.error
        assert mine.exists()
        RunCleanup.objects.filter(run=run).update(due_at=timezone.now())  # its back-off passed
        assert clean_up_due(api=api, config=config, key=key, host=host) == 1
    finally:
        api.close()
    cleanup = cleanup_of(run)
    assert (cleanup.status, cleanup.attempts, cleanup.deleted) == ("done", 2, 1)
    assert not mine.exists() and other.exists()
