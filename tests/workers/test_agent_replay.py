"""A remote vantage point's replay (issue 20 item 6): the claim names the trace by its sha256
and never a path; the agent fetches the text over its authenticated channel from the real web
app (Django's live server), checks the hash, writes it 0600 in a private run folder of its
host (removed after) and replays it against the lab; bytes that do not match the hash are
refused and the run fails saying so; another vantage point's agent cannot fetch it.

The agent's runner is called in this process (tests/workers/test_remote_vantage_point.py runs
the whole agent on a host of its own); the broker is RabbitMQ (a virtual host of the test's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.workers.test_celery import lab_endpoint
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.campaigns.traces import Trace, trace_create
from webapp.sites.enrolment import vantage_enrolment_start
from webapp.sites.models import VantagePoint
from workers.agent.api import AgentApi, AgentApiError
from workers.agent.config import AgentConfig, HostSettings
from workers.agent.runner import measure
from workers.agent.sealing import encode_key, new_private_key
from workers.engine.egress import EgressPolicy

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).parent / "engine" / "data"
JOB = (DATA / "recorded-job.csv").read_text()  # file-4M then file-1M
FIRST_FILE = "".join(JOB.splitlines(keepends=True)[:11])  # file-4M only
RECORDED_BYTES = 4 * 65536 + 28672 + 3 * 131072 + 1048576 + 100


def enrolled(name: str) -> tuple[VantagePoint, str, Any]:
    key = new_private_key()
    _, token = vantage_enrolment_start(name=name, now=timezone.now())
    answer = APIClient().post(
        "/api/v1/agent/enrol/",
        {"token": token, "public_key": encode_key(key.public_key)},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    return VantagePoint.objects.get(name=name), answer.json()["agent_token"], key


def replay_campaign(lab: Any, vantage_point: VantagePoint, trace: Trace) -> Campaign:
    campaign = Campaign.objects.create(
        name=f"replay-{vantage_point.name}",
        operations=["replay"],
        trace=trace,
        methods=["direct"],
        patterns=["sequential"],
        read_sizes=[65536],
        fractions=[1],
        clients=[1],
    )
    campaign.endpoints.set([lab_endpoint(lab, "local-root")])
    campaign.vantage_points.set([vantage_point])
    return campaign


def test_an_agent_fetches_the_trace_by_its_hash_and_replays_it(
    lab: Any,
    central: str,
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = tmp_path / "secrets"
    monkeypatch.setenv("FEDPROBE_SECRETS_DIR", str(secrets))
    vantage_point, token, key = enrolled("remote-replay")
    trace = trace_create(name="job", text=JOB, owner=None)
    campaign = replay_campaign(lab, vantage_point, trace)
    api = AgentApi(live_server.url, token=token)
    config = AgentConfig(live_server.url, vantage_point.name, vantage_point.queue, token, central)
    host = HostSettings(EgressPolicy.allowing(["127.0.0.0/8", "::1/128"]), None, ())

    # Not claimed yet: no running replay of this vantage point names the trace.
    with pytest.raises(AgentApiError) as early:
        api.trace(trace.sha256)
    assert early.value.status == 404

    (run,) = campaign_launch(campaign=campaign, trigger="api")
    measure(run.pk, api=api, config=config, key=key, host=host, worker="agent-test")
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.errors
    assert run.bytes_read == RECORDED_BYTES
    given = Path((run.result or {})["params"]["trace"])
    assert given.name == "trace.csv" and given.parent.parent == secrets
    assert list(secrets.iterdir()) == []  # the run's folder and its trace are gone

    # The server's bytes must be the ones the claim's hash names.
    (again,) = campaign_launch(campaign=campaign, trigger="api", if_idle=False)
    Trace.objects.filter(pk=trace.pk).update(text=JOB.replace("65536", "65537"))
    measure(again.pk, api=api, config=config, key=key, host=host, worker="agent-test")
    again.refresh_from_db()
    assert again.status == Run.Status.FAILED
    assert f"sent a trace whose sha256 is not {trace.sha256}" in again.errors[0]["message"]
    assert list(secrets.iterdir()) == []


def test_a_claim_names_the_trace_by_hash_and_only_its_own_agent_fetches_it(
    lab: Any, central: str, live_server: Any
) -> None:
    vantage_point, token, _ = enrolled("remote-replay")
    _, other_token, _ = enrolled("remote-other")
    trace = trace_create(name="job", text=JOB, owner=None)
    (run,) = campaign_launch(campaign=replay_campaign(lab, vantage_point, trace), trigger="api")
    api = AgentApi(live_server.url, token=token)
    claim = api.claim(run.pk, "agent-test")
    assert claim is not None
    assert claim.trace_sha256 == trace.sha256
    assert "trace" not in claim.params  # a path is the agent host's to choose
    assert api.trace(trace.sha256) == JOB
    with pytest.raises(AgentApiError) as refused:
        AgentApi(live_server.url, token=other_token).trace(trace.sha256)
    assert refused.value.status == 404
    with pytest.raises(AgentApiError, match="is not a sha256"):
        api.trace("../../runs/1/claim")


def test_a_queued_replay_keeps_the_trace_it_was_launched_with(
    lab: Any,
    central: str,
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The campaign's trace is changed while its runs wait: the agent is given, fetches and
    replays the one they were launched with; the campaign's new one is not an agent's to
    fetch until a run launched with it runs."""
    monkeypatch.setenv("FEDPROBE_SECRETS_DIR", str(tmp_path / "secrets"))
    vantage_point, token, key = enrolled("remote-replay")
    launched = trace_create(name="job", text=JOB, owner=None)
    later = trace_create(name="job-4M", text=FIRST_FILE, owner=None)
    campaign = replay_campaign(lab, vantage_point, launched)
    (first,) = campaign_launch(campaign=campaign, trigger="api")
    (second,) = campaign_launch(campaign=campaign, trigger="api", if_idle=False)
    campaign.trace = later
    campaign.save()
    api = AgentApi(live_server.url, token=token)
    config = AgentConfig(live_server.url, vantage_point.name, vantage_point.queue, token, central)
    host = HostSettings(EgressPolicy.allowing(["127.0.0.0/8", "::1/128"]), None, ())

    measure(first.pk, api=api, config=config, key=key, host=host, worker="agent-test")
    first.refresh_from_db()
    assert first.status == Run.Status.SUCCEEDED, first.errors
    assert first.bytes_read == RECORDED_BYTES  # both files: the trace it was launched with
    claim = api.claim(second.pk, "agent-test")
    assert claim is not None and claim.trace_sha256 == launched.sha256
    assert api.trace(launched.sha256) == JOB
    with pytest.raises(AgentApiError) as refused:
        api.trace(later.sha256)
    assert refused.value.status == 404
