"""The agent API's refusals (docs/vantage-points.md#the-agent-api): enrolment tokens that do
not enrol, bad keys, runs of another vantage point, reports that are not run JSON, and the
vantage point's read-only fields in the API. The broker accounts are real (RabbitMQ, a
virtual host of the test's own); the whole agent runs in
tests/workers/test_remote_vantage_point.py."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tests.webapp.factories import EndpointFactory, TestFileFactory, jwt
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch, run_fail
from webapp.sites.enrolment import vantage_enrolment_start
from webapp.sites.models import VantagePoint
from workers.agent.sealing import encode_key, fingerprint, new_private_key, open_sealed
from workers.engine.errors import ErrorClass

pytestmark = pytest.mark.django_db

ENROL = "/api/v1/agent/enrol/"


def public_key() -> str:
    return encode_key(new_private_key().public_key)


def enrolled(client: APIClient, name: str) -> tuple[VantagePoint, str]:
    _, token = vantage_enrolment_start(name=name, now=timezone.now())
    answer = client.post(ENROL, {"token": token, "public_key": public_key()}, format="json")
    assert answer.status_code == 201, answer.content
    return VantagePoint.objects.get(name=name), answer.json()["agent_token"]


def queued_run(vantage_point: VantagePoint) -> Run:
    endpoint = EndpointFactory(base_url="root://127.0.0.1:1094/")
    TestFileFactory(endpoint=endpoint, path="/data/f", size=1024 * 1024)
    campaign = Campaign.objects.create(
        name=f"c-{vantage_point.name}",
        methods=["direct"],
        patterns=["random"],
        read_sizes=[4096],
        fractions=[0.05],
        clients=[1],
    )
    campaign.endpoints.set([endpoint])
    campaign.vantage_points.set([vantage_point])
    return campaign_launch(campaign=campaign, trigger="api")[0]


def test_an_enrolment_token_enrols_once_and_not_after_it_expires(central: str) -> None:
    client = APIClient()
    _, token = vantage_enrolment_start(name="far-away", now=timezone.now())
    first = client.post(ENROL, {"token": token, "public_key": public_key()}, format="json")
    assert first.status_code == 201
    assert first["Cache-Control"] == "no-store"
    assert set(first.json()) == {
        "vantage_point",
        "queue",
        "agent_token",
        "broker_url",
        "public_key",
    }
    again = client.post(ENROL, {"token": token, "public_key": public_key()}, format="json")
    assert again.status_code == 403
    late = timezone.now() - timedelta(days=2)
    _, old = vantage_enrolment_start(name="late", now=late)
    expired = client.post(ENROL, {"token": old, "public_key": public_key()}, format="json")
    assert expired.status_code == 403
    assert not VantagePoint.objects.get(name="late").is_remote


def test_a_bad_public_key_is_refused_naming_it_and_the_token_still_enrols(central: str) -> None:
    client = APIClient()
    _, token = vantage_enrolment_start(name="far-away", now=timezone.now())
    bad = client.post(ENROL, {"token": token, "public_key": "not a key"}, format="json")
    assert bad.status_code == 400
    assert "public_key" in bad.json()
    good = client.post(ENROL, {"token": token, "public_key": public_key()}, format="json")
    assert good.status_code == 201


def test_the_api_shows_the_keys_fingerprint_and_when_it_enrolled(
    central: str, admin_client: Any
) -> None:
    vantage_point, _ = enrolled(APIClient(), "far-away")
    shown = admin_client.get(f"/api/v1/vantage-points/{vantage_point.pk}/").json()
    assert shown["public_key"] == fingerprint(vantage_point.public_key)
    assert shown["enrolled_at"] is not None
    assert shown["revoked_at"] is None
    url = f"/api/v1/vantage-points/{vantage_point.pk}/"
    changed = admin_client.patch(
        url,
        {
            "public_key": "x",
            "enrolled_at": None,
            "revoked_at": "2026-01-01T00:00:00Z",
            "location": "B",
        },
        content_type="application/json",
    )
    assert changed.status_code == 200, changed.content  # the read-only fields are ignored
    renamed = admin_client.patch(url, {"name": "renamed"}, content_type="application/json")
    assert renamed.status_code == 400  # its broker account reaches vantage.far-away only
    assert "name" in renamed.json()
    kept = VantagePoint.objects.get(pk=vantage_point.pk)
    assert (kept.name, kept.location) == ("far-away", "B")
    assert (kept.public_key, kept.enrolled_at) == (
        vantage_point.public_key,
        vantage_point.enrolled_at,
    )
    assert kept.revoked_at is None


def test_an_agent_reaches_only_its_own_runs_and_reports_must_be_run_json(central: str) -> None:
    client = APIClient()
    mine, token = enrolled(client, "mine")
    theirs, _ = enrolled(client, "theirs")
    other_run = queued_run(theirs)
    own_run = queued_run(mine)
    client.credentials(HTTP_AUTHORIZATION=f"Agent {token}")
    assert client.post(f"/api/v1/agent/runs/{other_run.pk}/claim/", {}).status_code == 404
    assert client.post(f"/api/v1/agent/runs/{other_run.pk}/result/", {}).status_code == 404
    assert Run.objects.get(pk=other_run.pk).status == "queued"
    claim = client.post(f"/api/v1/agent/runs/{own_run.pk}/claim/", {"worker": "w"}, format="json")
    assert claim.status_code == 200, claim.content
    assert claim.json()["credential"] is None  # an anonymous endpoint: nothing sealed
    assert "ca_dir" not in claim.json()["params"]
    progress = f"/api/v1/agent/runs/{own_run.pk}/progress/"
    beat = client.post(progress, {"client_bytes": [4096], "finished": []}, format="json")
    assert beat.json() == {"cancel": False}
    flood = client.post(progress, {"client_bytes": [0] * 5, "finished": []}, format="json")
    assert flood.status_code == 400  # one count per client of the run (it has 1), no more
    bad = client.post(
        f"/api/v1/agent/runs/{own_run.pk}/result/", {"status": "succeeded"}, format="json"
    )
    assert bad.status_code == 400
    assert Run.objects.get(pk=own_run.pk).status == "running"  # nothing of it was stored
    forged = client.post(
        f"/api/v1/agent/runs/{own_run.pk}/result/", {"status": "running"}, format="json"
    )
    assert forged.status_code == 400
    unknown = APIClient()
    unknown.credentials(HTTP_AUTHORIZATION="Agent not-a-token")
    assert unknown.post(f"/api/v1/agent/runs/{own_run.pk}/claim/", {}).status_code == 401
    # A user's API token is not an agent's.
    assert APIClient().post(f"/api/v1/agent/runs/{own_run.pk}/claim/", {}).status_code == 401


def test_an_agents_claim_carries_the_family_its_run_is_pinned_to(central: str) -> None:
    """A campaign's each is a run pinned to IPv4 and one to IPv6: each claim's parameters
    say its family, as the local worker's do (Run.engine_params)."""
    client = APIClient()
    vantage_point, token = enrolled(client, "dual-stack")
    endpoint = EndpointFactory(base_url="root://dual.example:1094/")
    TestFileFactory(endpoint=endpoint, path="/data/f", size=1024 * 1024)
    campaign = Campaign.objects.create(
        name="both families",
        methods=["direct"],
        patterns=["random"],
        read_sizes=[4096],
        fractions=[0.05],
        clients=[1],
        address_family="each",
    )
    campaign.endpoints.set([endpoint])
    campaign.vantage_points.set([vantage_point])
    runs = campaign_launch(campaign=campaign, trigger="api")
    client.credentials(HTTP_AUTHORIZATION=f"Agent {token}")
    claimed = {}
    for run in runs:
        answer = client.post(f"/api/v1/agent/runs/{run.pk}/claim/", {"worker": "w"}, format="json")
        assert answer.status_code == 200, answer.content
        claimed[run.address_family] = answer.json()["params"]["address_family"]
        # One run on an endpoint at a time: this one ends before the next is claimed.
        run_fail(run_id=run.pk, message="ended by the test", error_class=ErrorClass.HARNESS)
    assert claimed == {"4": "4", "6": "6"}


def test_enrolment_needs_a_broker_that_makes_accounts(settings: Any) -> None:
    settings.FEDPROBE_BROKER_ADMIN_URL = ""
    with pytest.raises(CommandError, match="FEDPROBE_BROKER_ADMIN_URL"):
        call_command("vantage", "enrol", "far-away", stdout=StringIO(), stderr=StringIO())
    assert not VantagePoint.objects.filter(name="far-away").exists()


def test_the_local_vantage_point_is_never_enrolled(central: str) -> None:
    with pytest.raises(CommandError, match="deployment's own vantage point"):
        call_command("vantage", "enrol", "local", stdout=StringIO(), stderr=StringIO())


def test_the_health_counts_what_waits_on_rabbitmq(
    central: str, django_capture_on_commit_callbacks: Any
) -> None:
    """On RabbitMQ the vantage point page's count of waiting messages is the queue's own
    (a passive declare), and a queue nothing was ever sent to holds none."""
    from webapp.campaigns.health import broker_message_counts

    vantage_point, _ = enrolled(APIClient(), "far-away")
    assert broker_message_counts(queues=[vantage_point.queue]) == {vantage_point.queue: 0}
    with django_capture_on_commit_callbacks(execute=True):
        queued_run(vantage_point)
    assert broker_message_counts(queues=[vantage_point.queue]) == {vantage_point.queue: 1}


def test_a_copy_gives_each_side_its_own_endpoints_credential_sealed_apart(central: str) -> None:
    """A third-party copy presents the source its endpoint's token and the destination its
    own (scoped to write there): the local worker's parameters carry both, and an agent's
    claim carries both, each sealed to the agent's key for this run only."""
    key = new_private_key()
    _, enrolment = vantage_enrolment_start(name="copier", now=timezone.now())
    client = APIClient()
    answer = client.post(
        ENROL, {"token": enrolment, "public_key": encode_key(key.public_key)}, format="json"
    )
    assert answer.status_code == 201, answer.content
    vantage_point = VantagePoint.objects.get(name="copier")
    far = timezone.now() + timedelta(days=1)
    source_token = jwt(iss="https://issuer.example", scope="storage.read:/", exp=far.timestamp())
    destination_token = jwt(
        iss="https://issuer.example",
        scope="storage.read:/ storage.modify:/scratch",
        exp=far.timestamp(),
    )
    source = EndpointFactory(
        protocol="https",
        base_url="https://127.0.0.1:8443",
        credential_kind="token",
        credential=source_token,
    )
    TestFileFactory(endpoint=source, path="/data/f", size=1024 * 1024)
    destination = EndpointFactory(
        base_url="https://127.0.0.2:8443",
        protocol="https",
        credential_kind="token",
        credential=destination_token,
        scratch_path="/scratch",
    )
    campaign = Campaign.objects.create(
        name="copies",
        methods=["direct"],
        patterns=["sequential"],
        read_sizes=[1024 * 1024],
        fractions=[1],
        clients=[1],
        operations=["tpc-pull"],
        destination_endpoint=destination,
    )
    campaign.endpoints.set([source])
    campaign.vantage_points.set([vantage_point])
    (run,) = campaign_launch(campaign=campaign, trigger="api")

    local = Run.objects.get(pk=run.pk).engine_params()
    assert local.credential is not None and local.credential.secret == source_token
    assert local.destination_credential is not None
    assert local.destination_credential.secret == destination_token

    client.credentials(HTTP_AUTHORIZATION=f"Agent {answer.json()['agent_token']}")
    claim = client.post(f"/api/v1/agent/runs/{run.pk}/claim/", {"worker": "w"}, format="json")
    assert claim.status_code == 200, claim.content
    body = claim.json()
    assert destination_token not in claim.content.decode()
    assert source_token not in claim.content.decode()
    opened = {
        side: open_sealed(body[side], key, run_id=run.pk, vantage_point="copier").secret
        for side in ("credential", "destination_credential")
    }
    assert opened == {"credential": source_token, "destination_credential": destination_token}
    assert body["params"]["destination"] == "https://127.0.0.2:8443/scratch/"
