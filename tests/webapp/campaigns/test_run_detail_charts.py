"""The run detail's charts (run_charts): each client's phases, latency histograms per operation
kind merged over the clients, the data servers, errors; the same numbers in the API's run
detail; bounded queries. Runs measured against the real lab, in-process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.webapp.factories import CampaignFactory, RunFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.run_detail import run_charts
from webapp.campaigns.selectors import run_detail
from webapp.campaigns.services import campaign_launch, run_claim, run_execute, run_fail, run_ingest
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint
from workers.engine.errors import ErrorClass
from workers.engine.metrics import READ_KINDS, ClientError, ClientResult

pytestmark = pytest.mark.django_db


def lab_run(lab: Any, endpoint: str, path: str | None = None, **params: Any) -> Run:
    """A run of the lab's `endpoint` measured in this process (as a worker would)."""
    lab_register(lab=lab)
    endpoint_row = Endpoint.objects.get(name=endpoint)
    axes = ("methods", "patterns", "read_sizes", "fractions", "clients")
    campaign = CampaignFactory(
        endpoints=[endpoint_row], **{k: [v] if k in axes else v for k, v in params.items()}
    )
    if path:
        campaign.test_files.set([endpoint_row.files.get(path=path)])
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    run_execute(run_id=run.pk, worker="test@host")
    run = run_detail(run.pk)
    assert run.status == Run.Status.SUCCEEDED, run.errors
    return run


def server_of(lab: Any, endpoint: str) -> str:
    return lab.endpoint(endpoint).url.split("://")[1].strip("/")


@pytest.mark.parametrize(
    ("method", "phases"),
    [("direct", ["open", "read", "close"]), ("copy", ["copy", "open", "read", "close"])],
)
def test_each_client_has_its_phases_in_order_from_the_release(
    lab: Any, method: str, phases: list[str]
) -> None:
    run = lab_run(lab, "near-root", methods=method, clients=3, fractions=0.25)
    charts = run_charts(run)
    assert charts["released_at"] == run.result["released_at"] is not None
    assert [row["client"] for row in charts["timeline"]] == [0, 1, 2]
    for row in charts["timeline"]:
        assert [p["phase"] for p in row["phases"]] == phases
        edges = [t for p in row["phases"] for t in (p["start_s"], p["end_s"])]
        assert edges == sorted(edges) and edges[0] >= 0
        (read,) = [p for p in row["phases"] if p["phase"] == "read"]
        assert read["start_s"] < row["ttfb_s"] <= read["end_s"]
        assert row["end_s"] >= edges[-1]
        assert (row["status"], row["error"]) == ("ok", None)


@pytest.mark.parametrize(
    ("pattern", "kind"), [("random", "read"), ("vector", "readv"), ("async", "async_read")]
)
def test_histograms_count_every_operation_and_match_the_engines_percentiles(
    lab: Any, pattern: str, kind: str
) -> None:
    run = lab_run(lab, "local-root", patterns=pattern, clients=3, read_sizes=4096)
    hist = run_charts(run)["latency_hist"]
    assert next(iter(hist)) == kind  # the read kind first
    assert sum(hist[k]["count"] for k in hist if k in READ_KINDS) == run.ops > 0
    assert hist["open"]["count"] == hist["close"]["count"] == 3
    for name, merged in hist.items():
        assert sum(b["count"] for b in merged["buckets"]) == merged["count"]
        edges = [e for b in merged["buckets"] for e in (b["lower_us"], b["upper_us"])]
        assert edges == sorted(edges)
        # The same summary as the engine's own merge, stored with the run.
        summary = {k: v for k, v in merged.items() if k != "buckets"}
        assert summary == run.result["latency_us"][name]
        assert merged["buckets"][0]["lower_us"] <= merged["p50"] <= merged["max"]
    read = hist[kind]
    assert (read["p50"], read["p90"], read["p99"], read["max"]) == (
        run.latency_p50_us,
        run.latency_p90_us,
        run.latency_p99_us,
        run.latency_max_us,
    )


def test_a_redirected_run_names_the_data_server_of_each_client(lab: Any) -> None:
    run = lab_run(lab, "redirector-root", "/fed/a-4M", clients=3)
    charts = run_charts(run)
    data_server = server_of(lab, "fed-a-root")
    assert data_server != server_of(lab, "redirector-root")
    assert [row["served_by"] for row in charts["timeline"]] == [[data_server]] * 3
    assert charts["served_by_clients"] == [
        {"server": data_server, "clients": [0, 1, 2], "ok": 3, "failed": 0}
    ]
    assert [row["server"] for row in charts["served_by_clients"]] == run.served_by


# -- runs that did not measure -----------------------------------------------------------------


def test_a_queued_run_has_empty_charts() -> None:
    run = run_detail(RunFactory().pk)
    assert run_charts(run) == {
        "released_at": None,
        "timeline": [],
        "latency_hist": {},
        "served_by_clients": [],
    }


def test_a_run_that_failed_before_its_clients_started_shows_their_error() -> None:
    run = RunFactory(clients=2)
    run_claim(run_id=run.pk, worker="w")
    run_fail(run_id=run.pk, message="file:///x: not under FEDPROBE_FILE_ROOTS")
    charts = run_charts(run_detail(run.pk))
    assert [(r["client"], r["status"], r["phases"]) for r in charts["timeline"]] == [
        (0, "failed", []),
        (1, "failed", []),
    ]
    assert charts["timeline"][0]["error"] == {
        "class": "server-error",
        "message": "file:///x: not under FEDPROBE_FILE_ROOTS",
    }
    assert (charts["latency_hist"], charts["served_by_clients"]) == ({}, [])


# -- engine-shaped records, for what the lab does not do on demand -------------------------------


def engine_record(client: int, server: str, error: ClientError | None = None) -> dict[str, Any]:
    """A client's record as the engine makes it (ClientResult.to_json)."""
    result = ClientResult(client=client, served_by=[server], ttfb_s=0.011, wall_s=0.05)
    result.add_phase("open", 0.0001, 0.01)
    result.add_phase("read", 0.0101, 0.04 if error else 0.049)
    if not error:
        result.add_phase("close", 0.049, 0.0495)
    result.histogram("open").record(9_900_000)
    result.histogram("read").record_all([100_000 + 1000 * i for i in range(50)])
    result.error = error
    return result.to_json()


def ingested_run(clients: int, *, failing: frozenset[int] = frozenset()) -> Run:
    run = RunFactory(clients=clients)
    run_claim(run_id=run.pk, worker="w")
    records = [
        engine_record(
            c,
            f"data-{c % 2}.example:1094",
            ClientError(ErrorClass.TIMEOUT, "no answer", 0.04) if c in failing else None,
        )
        for c in range(clients)
    ]
    status = "partial" if failing else "succeeded"
    run_ingest(
        run_id=run.pk,
        run_json={"status": status, "clients": records, "released_at": "2026-01-01T00:00:00+00:00"},
    )
    return run


def test_errors_are_on_their_clients_rows_and_servers_count_them() -> None:
    run = ingested_run(4, failing=frozenset({1}))
    charts = run_charts(run_detail(run.pk))
    failed = charts["timeline"][1]
    assert (failed["status"], failed["error"]) == (
        "failed",
        {"class": "timeout", "message": "no answer"},
    )
    assert failed["end_s"] == 0.05
    assert charts["served_by_clients"] == [
        {"server": "data-0.example:1094", "clients": [0, 2], "ok": 2, "failed": 0},
        {"server": "data-1.example:1094", "clients": [1, 3], "ok": 1, "failed": 1},
    ]
    assert charts["latency_hist"]["read"]["count"] == 4 * 50


@pytest.mark.parametrize("clients", [2, 64])
def test_charts_take_the_detail_queries_whatever_the_client_count(
    clients: int, django_assert_num_queries: Any
) -> None:
    run = ingested_run(clients)
    with django_assert_num_queries(2):  # the run with its relations, its attempts
        charts = run_charts(run_detail(run.pk))
    assert len(charts["timeline"]) == clients


# -- the API and the page show the same numbers -------------------------------------------------


def viewer_client() -> Client:
    user = User.objects.create_user(f"viewer-{timezone.now().timestamp()}")
    user_set_role(user=user, role="viewer")
    client = Client()
    client.force_login(user)
    return client


def page_charts(html: str) -> dict[str, Any]:
    start = html.index('<script id="run-charts" type="application/json">')
    body = html[start:].split(">", 1)[1].split("</script>", 1)[0]
    return json.loads(body)  # type: ignore[no-any-return]


def test_the_api_run_detail_carries_the_charts_data_the_page_draws(lab: Any) -> None:
    run = lab_run(lab, "redirector-root", "/fed/a-4M", clients=2)
    client = viewer_client()
    detail = client.get(f"/api/v1/runs/{run.pk}/").json()
    drawn = page_charts(client.get(f"/runs/{run.pk}/").content.decode())
    expected = json.loads(json.dumps(run_charts(run_detail(run.pk))))
    assert drawn == expected
    assert {k: detail[k] for k in expected} == expected
    assert detail["clients"][0]["phases"] == [
        {"phase": p["phase"], "start_s": p["start_s"], "end_s": p["end_s"]}
        for p in expected["timeline"][0]["phases"]
    ]


@pytest.mark.parametrize("path", ["/api/v1/runs/{}/", "/runs/{}/"])
def test_the_detail_queries_do_not_grow_with_the_clients(
    path: str, django_assert_max_num_queries: Any
) -> None:
    client = viewer_client()
    small, large = ingested_run(2), ingested_run(128)
    client.get(path.format(small.pk))  # sessions and roles warmed up
    with CaptureQueriesContext(connection) as few:
        assert client.get(path.format(small.pk)).status_code == 200
    with django_assert_max_num_queries(len(few)):
        assert client.get(path.format(large.pk)).status_code == 200


def test_attempt_rows_and_records_agree_on_status(lab: Any) -> None:
    run = lab_run(lab, "local-root", clients=2)
    statuses = dict(ClientAttempt.objects.filter(run=run).values_list("client", "status"))
    assert {r["client"]: r["status"] for r in run_charts(run)["timeline"]} == statuses


def test_a_filestager_run_has_its_copies_and_waits_on_the_timeline(lab: Any) -> None:
    run = lab_run(lab, "local-root", methods="stage", files=2, clients=2, fractions=0.25)
    for row in run_charts(run)["timeline"]:
        phases = [p["phase"] for p in row["phases"]]
        assert sorted(phases) == sorted(
            ["copy", "copy", "stage-wait", *["open", "read", "close"] * 2]
        )
        assert all(p["start_s"] <= p["end_s"] <= row["end_s"] for p in row["phases"])
        assert row["served_by"] == [server_of(lab, "local-root")]
