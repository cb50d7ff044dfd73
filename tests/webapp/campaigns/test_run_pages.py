"""Run pages: the list with the API's filters, the detail with its clients, the live status JSON,
cancel, and user-supplied names kept inert."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.webapp.factories import (
    CampaignFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Campaign, ClientAttempt, Run
from webapp.campaigns.services import run_claim

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


def login(client: Client, role: str) -> User:
    user = User.objects.create_user(role)
    user_set_role(user=user, role=role)
    client.force_login(user)
    return user


def listed_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-run-id="(\d+)"', html)]


# -- the list and the API agree ----------------------------------------------------------------


@pytest.fixture
def varied_runs() -> dict[str, Any]:
    """Runs that differ in every filtered field."""
    test_file = TestFileFactory()
    other_file = TestFileFactory()
    campaign = CampaignFactory(endpoints=[test_file.endpoint])
    remote = VantagePointFactory(name="remote")
    old = RunFactory(campaign=campaign, test_file=test_file, status="succeeded")
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    RunFactory(campaign=campaign, test_file=test_file, status="failed", method="copy")
    RunFactory(campaign=campaign, test_file=test_file, status="partial", clients=4)
    RunFactory(test_file=other_file, status="running", pattern="async", vantage_point=remote)
    RunFactory(test_file=other_file, read_size=4096, trigger="schedule")
    return {"campaign": campaign, "endpoint": other_file.endpoint}


def query_strings(runs: dict[str, Any]) -> list[str]:
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+", "%2B")
    return [
        "",
        f"campaign={runs['campaign'].pk}",
        f"endpoint={runs['endpoint'].pk}",
        "vantage_point=remote",
        "status=failed&status=partial",
        "status=queued",
        "method=copy",
        "pattern=async",
        "read_size=4096",
        "clients=4",
        "trigger=schedule",
        f"created_after={since}",
        f"created_before={since}",
        f"campaign={runs['campaign'].pk}&status=succeeded&status=partial&clients=2",
    ]


def test_the_runs_list_filters_as_the_api_does(varied_runs: dict[str, Any]) -> None:
    page, api = Client(), APIClient()
    api.force_authenticate(login(page, "viewer"))
    seen = set()
    for query in query_strings(varied_runs):
        html = page.get(f"/runs/?{query}").content.decode()
        answer = api.get(f"/api/v1/runs/?{query}&limit=500").json()
        api_ids = [r["id"] for r in answer["results"]]
        assert listed_ids(html) == api_ids, query
        seen.add(tuple(api_ids))
    assert len(seen) >= 10  # the filters really filter


def test_bad_filters_list_nothing_and_name_the_field(client: Client) -> None:
    RunFactory()
    login(client, "viewer")
    response = client.get("/runs/?status=bogus")
    html = response.content.decode()
    assert response.status_code == 200
    assert listed_ids(html) == []
    assert "status: Select a valid choice" in html


def test_the_runs_list_pages_keep_the_filters(client: Client) -> None:
    test_file = TestFileFactory()
    campaign = CampaignFactory(endpoints=[test_file.endpoint])
    for _ in range(51):
        RunFactory(campaign=campaign, test_file=test_file, status="failed")
    RunFactory(test_file=test_file, status="failed")
    login(client, "viewer")
    first = client.get(f"/runs/?campaign={campaign.pk}").content.decode()
    assert len(listed_ids(first)) == 50
    assert f"campaign={campaign.pk}&amp;page=2" in first
    second = client.get(f"/runs/?campaign={campaign.pk}&page=2").content.decode()
    assert len(listed_ids(second)) == 1


def test_active_runs_show_their_progress_server_side(client: Client) -> None:
    test_file = TestFileFactory(size=16 * MiB)
    run = RunFactory(test_file=test_file, fraction=0.5, clients=2)
    run_claim(run_id=run.pk, worker="w")
    ClientAttempt.objects.filter(run=run).update(bytes_read=4 * MiB)
    login(client, "viewer")
    html = client.get("/runs/").content.decode()
    assert '<progress max="100" value="50.0">' in html
    assert "8 MiB of 16 MiB" in html
    assert 'data-final="false"' in html
    assert "js/runs.js" in html


# -- the status JSON ----------------------------------------------------------------------------


def test_status_json_gives_bytes_read_of_planned_per_run_and_client(client: Client) -> None:
    test_file = TestFileFactory(size=16 * MiB)
    running = RunFactory(test_file=test_file, fraction=0.25, clients=2)
    run_claim(run_id=running.pk, worker="w")
    ClientAttempt.objects.filter(run=running, client=1).update(bytes_read=MiB)
    queued = RunFactory(test_file=test_file, fraction=1.0, clients=1)
    login(client, "viewer")
    answer = client.get(f"/runs/status/?ids={running.pk},{queued.pk},999999&clients=1").json()
    first, second = answer["runs"]
    assert first == {
        "id": running.pk,
        "status": "running",
        "final": False,
        "bytes_read": MiB,
        "bytes_planned": 8 * MiB,
        "percent": 12.5,
        "clients": [
            {"client": 0, "status": "running", "bytes_read": 0, "bytes_planned": 4 * MiB},
            {"client": 1, "status": "running", "bytes_read": MiB, "bytes_planned": 4 * MiB},
        ],
    }
    assert (second["id"], second["status"], second["percent"]) == (queued.pk, "queued", 0.0)
    assert "clients" not in client.get(f"/runs/status/?ids={queued.pk}").json()["runs"][0]


@pytest.mark.parametrize("ids", ["1,x", "-1", ",".join(["1"] * 101), "9" * 30])
def test_status_json_refuses_bad_ids_naming_them(client: Client, ids: str) -> None:
    login(client, "viewer")
    response = client.get("/runs/status/", {"ids": ids})
    assert response.status_code == 400
    assert "ids" in response.json()


def test_status_json_needs_a_login(client: Client) -> None:
    assert client.get("/runs/status/?ids=1").status_code == 302


# -- the detail -------------------------------------------------------------------------------


def finished_run() -> Run:
    run = RunFactory(
        status="partial",
        clients=2,
        wall_s=1.5,
        open_s=0.012,
        ttfb_s=0.02,
        throughput_mbps=123.45,
        ops=2048,
        latency_p50_us=210.0,
        latency_p90_us=400.0,
        latency_p99_us=900.0,
        latency_max_us=1500.0,
        bytes_requested=8 * MiB,
        bytes_read=8 * MiB,
        bytes_wire=9 * MiB,
        cpu_s=0.25,
        served_by=["127.0.0.1:21002"],
        errors=[{"class": "timeout", "message": "no answer by the run's deadline", "client": 1}],
    )
    now = timezone.now()
    record = {
        "client": 0,
        "open_s": 0.0123,
        "ttfb_s": 0.0201,
        "throughput_mbps": 61.7,
        "served_by": ["127.0.0.1:21002"],
        "bytes_read": 8 * MiB,
    }
    ClientAttempt.objects.create(
        run=run, client=0, status="ok", heartbeat_at=now, bytes_read=8 * MiB, record=record
    )
    ClientAttempt.objects.create(
        run=run,
        client=1,
        status="failed",
        heartbeat_at=now,
        error_class="timeout",
        error_message="no answer by the run's deadline",
    )
    return run


def test_the_detail_shows_parameters_aggregates_errors_and_clients(client: Client) -> None:
    run = finished_run()
    login(client, "viewer")
    html = client.get(f"/runs/{run.pk}/").content.decode()
    for shown in (
        "123.45 MB/s",
        "210 µs / 400 µs / 900 µs / 1.50 ms",
        "9 MiB",
        "127.0.0.1:21002",
        "no answer by the run&#x27;s deadline",
        "<dd>64 KiB</dd>",
        run.test_file.url,
    ):
        assert shown in html, shown
    rows = re.findall(r'<tr data-client="(\d)">(.*?)</tr>', html, re.S)
    assert [r[0] for r in rows] == ["0", "1"]
    assert "12.3 ms" in rows[0][1] and "61.70" in rows[0][1] and str(8 * MiB) in rows[0][1]
    assert "timeout" in rows[1][1]
    assert '"final": true' in html  # an ended run's script draws its charts, never polls
    assert f"/runs/{run.pk}/cancel/" not in html


def test_a_running_runs_detail_polls_and_offers_cancel_to_its_owner(client: Client) -> None:
    run = RunFactory()
    run_claim(run_id=run.pk, worker="w")
    Campaign.objects.filter(pk=run.campaign_id).update(owner=login(client, "operator"))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "js/run_detail.js" in html
    assert f"/runs/{run.pk}/cancel/" in html
    assert f"/runs/status/?ids={run.pk}\\u0026clients=1" in html  # in the json_script data


def test_an_unknown_run_is_404(client: Client) -> None:
    login(client, "viewer")
    assert client.get("/runs/999999/").status_code == 404


# -- cancel -----------------------------------------------------------------------------------


def test_an_operator_cancels_a_queued_run_of_its_campaign_from_its_page(client: Client) -> None:
    run = RunFactory()
    Campaign.objects.filter(pk=run.campaign_id).update(owner=login(client, "operator"))
    response = client.post(f"/runs/{run.pk}/cancel/", follow=True)
    assert response.redirect_chain == [(f"/runs/{run.pk}/", 302)]
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert f"Run {run.pk} cancelled." in response.content.decode()


def test_a_viewer_cannot_cancel(client: Client) -> None:
    run = RunFactory()
    login(client, "viewer")
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"/runs/{run.pk}/cancel/" not in html
    assert client.post(f"/runs/{run.pk}/cancel/").status_code == 403
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == (Run.Status.QUEUED, False)


# -- names stay text --------------------------------------------------------------------------


def test_a_campaign_named_like_a_script_renders_escaped_everywhere(client: Client) -> None:
    name = "<script>alert(1)</script>"
    test_file = TestFileFactory()
    campaign = CampaignFactory(name=name, endpoints=[test_file.endpoint])
    run = RunFactory(campaign=campaign, test_file=test_file)
    operator = login(client, "admin")
    campaign.owner = operator
    campaign.save()
    pages = [
        "/",
        "/campaigns/",
        f"/campaigns/{campaign.pk}/",
        f"/campaigns/{campaign.pk}/edit/",
        "/runs/",
        f"/runs/?campaign={campaign.pk}",
        f"/runs/{run.pk}/",
    ]
    for path in pages:
        html = client.get(path).content.decode()
        assert name not in html, path
        assert "alert(1)" in html, path  # the name is there, as text
    launched = client.post(f"/campaigns/{campaign.pk}/launch/", follow=True)
    assert name not in launched.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in launched.content.decode()
    cloned = client.post(f"/campaigns/{campaign.pk}/clone/", follow=True)
    assert name not in cloned.content.decode()
