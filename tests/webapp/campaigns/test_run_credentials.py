"""Runs present their endpoint's credential: a run on the lab's token site succeeds with an
oauth client's token, an issuer that refuses the client fails the run before any client
starts, and the message that queues a run holds its id only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from celery.signals import before_task_publish

from tests.servers import celery_sends_to
from tests.webapp.factories import CampaignFactory, TestFileFactory, jwt
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.sites.models import Endpoint
from workers.engine.oauth import OAuthClient

pytestmark = pytest.mark.django_db


def launch_one(endpoint: Endpoint) -> Run:
    campaign = CampaignFactory(
        endpoints=[endpoint], methods=["direct"], read_sizes=[4096], fractions=[0.01], clients=[2]
    )
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    return run


def test_a_run_on_a_token_site_succeeds_with_the_oauth_clients_token(registered: Any) -> None:
    run = launch_one(Endpoint.objects.get(name="near-roots"))
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.errors
    assert run.auth == "token"
    assert run.tls and run.tls.get("version")


def test_an_issuer_refusing_the_client_fails_the_run_as_auth_before_any_client(
    registered: Any,
) -> None:
    endpoint = Endpoint.objects.get(name="near-https")
    wrong = {**registered.oauth_client(), "client_secret": "wr0ng-client-s3cret"}
    endpoint.credential = OAuthClient.from_json(json.dumps(wrong)).to_json()
    endpoint.save()
    run = launch_one(endpoint)
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    (error,) = run.errors
    assert error["class"] == "auth"
    assert "token request" in error["message"]
    # The tester's credential, not the endpoint, failed: never counted against it.
    assert error["phase"] == "credential" and run.is_tester_fault
    assert "wr0ng-client-s3cret" not in json.dumps(run.errors)
    attempts = run.attempts.all()
    assert {a.status for a in attempts} != {ClientAttempt.Status.OK}
    assert not any(a.record for a in attempts)  # no client ran


def test_the_message_that_queues_a_run_carries_its_id_only(
    django_capture_on_commit_callbacks: Any,
) -> None:
    secret = jwt(iss="https://iam.example.org/", scope="storage.read:/", exp=4102444800)
    endpoint = TestFileFactory().endpoint
    endpoint.credential_kind, endpoint.credential = "token", secret
    endpoint.save()
    published: list[Any] = []

    def keep(body: Any = None, **_: Any) -> None:
        published.append(body)

    before_task_publish.connect(keep, weak=False)
    try:
        with celery_sends_to("memory://"), django_capture_on_commit_callbacks(execute=True):
            run = launch_one(endpoint)
    finally:
        before_task_publish.disconnect(keep)
    assert published
    for body in published:
        assert secret.split(".")[1] not in repr(body)
    assert [run.pk] in [list(body[0]) for body in published]


def test_a_worker_host_that_cannot_keep_credentials_private_is_a_harness_fault(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The secrets folder is open to others: the run fails as the tester's fault (harness)
    before anything is sent, and no endpoint figure counts it."""
    shared = tmp_path / "secrets"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv("FEDPROBE_SECRETS_DIR", str(shared))
    test_file = TestFileFactory(
        endpoint__base_url="https://127.0.0.1:9/",
        endpoint__protocol="https",
        endpoint__credential_kind="token",
        endpoint__credential=jwt(sub="robot", exp=4_102_444_800),
    )
    run = launch_one(test_file.endpoint)
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.errors[0]["class"] == "harness" and run.is_tester_fault
    assert "mode 0700" in run.errors[0]["message"]
