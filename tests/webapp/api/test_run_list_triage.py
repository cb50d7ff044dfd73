"""The runs API for triage: ?error_class=, a validated ?ordering= (each direction, ties by id,
empty figures last ascending) and /api/v1/runs/csv/ (the same filters and order, streamed,
without secrets). On PostgreSQL, and with the page's tests on the embedded SQLite database in
bin/test's SQLite stage (marker `sqlite`: JSON and NULL ordering differ in SQL)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from tests.webapp.api.test_api import client_for
from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory
from webapp.campaigns.models import Run
from webapp.sites.models import Endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]


@pytest.fixture
def viewer() -> APIClient:
    return client_for("viewer")


def failed(error_class: str, message: str, **fields: Any) -> Run:
    errors = [{"class": error_class, "message": message, "client": c} for c in range(2)]
    return RunFactory(status="failed", errors=errors, wall_s=fields.pop("wall_s", 0.5), **fields)


@pytest.fixture
def triage_runs() -> dict[str, Run]:
    test_file = TestFileFactory()
    same = {"test_file": test_file}
    return {
        "fast": RunFactory(status="succeeded", wall_s=2.0, throughput_mbps=900.0, **same),
        "slow": RunFactory(status="succeeded", wall_s=40.0, throughput_mbps=12.5, **same),
        "refused": failed("refused", "connection refused\nat 127.0.0.1:1094", **same),
        "auth": failed("auth", "authentication failed: token expired", wall_s=3.0, **same),
        "partial": RunFactory(
            status="partial",
            wall_s=9.0,
            throughput_mbps=50.0,
            errors=[{"class": "short-read", "message": "closed early", "client": 1}],
            **same,
        ),
        "queued": RunFactory(**same),
    }


def ids(answer: Any) -> list[int]:
    assert answer.status_code == 200, answer.content[:500]
    return [run["id"] for run in answer.json()["results"]]


def test_error_class_filter_lists_the_runs_whose_first_error_is_of_that_class(
    viewer: APIClient, triage_runs: dict[str, Run]
) -> None:
    assert ids(viewer.get("/api/v1/runs/", {"error_class": "refused"})) == [
        triage_runs["refused"].pk
    ]
    assert ids(viewer.get("/api/v1/runs/", {"error_class": "short-read"})) == [
        triage_runs["partial"].pk
    ]
    assert ids(viewer.get("/api/v1/runs/", {"error_class": "checksum"})) == []


def test_an_unknown_error_class_is_a_400_naming_the_field(viewer: APIClient) -> None:
    answer = viewer.get("/api/v1/runs/", {"error_class": "gremlins"})
    assert answer.status_code == 400
    assert "error_class" in answer.json()


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        ("wall_s", ["refused", "fast", "auth", "partial", "slow", "queued"]),
        ("-wall_s", ["queued", "slow", "partial", "auth", "fast", "refused"]),
        ("throughput_mbps", ["slow", "partial", "fast", "refused", "auth", "queued"]),
        ("-throughput_mbps", ["queued", "auth", "refused", "fast", "partial", "slow"]),
        ("-created", ["queued", "partial", "auth", "refused", "slow", "fast"]),
        ("created", ["fast", "slow", "refused", "auth", "partial", "queued"]),
        ("status", ["refused", "auth", "partial", "queued", "fast", "slow"]),
    ],
)
def test_ordering_sorts_by_the_column_with_empty_figures_last_ascending_and_ties_by_id(
    viewer: APIClient, triage_runs: dict[str, Run], ordering: str, expected: list[str]
) -> None:
    """Empty is largest on every database: last ascending, first descending (so each
    direction is read from one index on PostgreSQL); equal values (the runs without a
    figure) follow their ids in the column's direction."""
    listed = ids(viewer.get("/api/v1/runs/", {"ordering": ordering}))
    assert listed == [triage_runs[name].pk for name in expected]


def test_ordering_keeps_the_filters_and_the_pagination(
    viewer: APIClient, triage_runs: dict[str, Run]
) -> None:
    query = {"ordering": "-wall_s", "status": ["succeeded", "failed"], "limit": 2}
    first = viewer.get("/api/v1/runs/", query)
    second = viewer.get("/api/v1/runs/", {**query, "offset": 2})
    assert first.json()["count"] == 4
    names = ["slow", "auth", "fast", "refused"]
    assert ids(first) + ids(second) == [triage_runs[name].pk for name in names]


@pytest.mark.parametrize("ordering", ["bogus", "-endpoint", "wall_s,password", "errors"])
def test_an_unknown_ordering_is_a_400_naming_the_field(viewer: APIClient, ordering: str) -> None:
    answer = viewer.get("/api/v1/runs/", {"ordering": ordering})
    assert answer.status_code == 400
    assert list(answer.json()) == ["ordering"]


# -- CSV ----------------------------------------------------------------------------------


def csv_rows(answer: Any) -> list[dict[str, str]]:
    assert answer.status_code == 200, answer.content[:500]
    assert isinstance(answer, StreamingHttpResponse)
    assert answer["Content-Type"].startswith("text/csv")
    text = b"".join(answer.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_is_the_filtered_ordered_list_with_error_and_figures(
    viewer: APIClient, triage_runs: dict[str, Run]
) -> None:
    answer = viewer.get("/api/v1/runs/csv/", {"ordering": "-wall_s", "status": "failed"})
    rows = csv_rows(answer)
    assert [int(row["id"]) for row in rows] == [triage_runs["auth"].pk, triage_runs["refused"].pk]
    auth, refused = rows
    assert auth["status"] == "failed" and auth["error_class"] == "auth"
    assert auth["error_message"] == "authentication failed: token expired"
    assert refused["error_message"] == "connection refused\nat 127.0.0.1:1094"
    assert float(auth["wall_s"]) == 3.0 and auth["throughput_mbps"] == ""
    assert auth["endpoint"] == triage_runs["auth"].endpoint.name
    assert auth["campaign"] == triage_runs["auth"].campaign.name
    assert auth["created_at"].startswith(str(triage_runs["auth"].created_at.year))


def test_csv_without_filters_has_every_run_newest_first(
    viewer: APIClient, triage_runs: dict[str, Run]
) -> None:
    rows = csv_rows(viewer.get("/api/v1/runs/csv/"))
    assert [int(row["id"]) for row in rows] == sorted(r.pk for r in triage_runs.values())[::-1]
    assert rows[0]["error_class"] == "" and rows[0]["wall_s"] == ""


def test_csv_is_written_in_batches_not_at_once(viewer: APIClient, monkeypatch: Any) -> None:
    monkeypatch.setattr("webapp.api.run_csv.BATCH_ROWS", 2)
    test_file = TestFileFactory()
    for _ in range(5):
        RunFactory(test_file=test_file)
    answer = viewer.get("/api/v1/runs/csv/")
    chunks = list(answer.streaming_content)
    assert len(chunks) == 1 + 3  # the header, then 2 + 2 + 1 rows
    assert len(list(csv.reader(io.StringIO(b"".join(chunks).decode())))) == 6


def test_csv_carries_no_credential_nor_url_userinfo_and_defuses_formulas(
    viewer: APIClient,
) -> None:
    test_file = TestFileFactory()
    endpoint = test_file.endpoint
    Endpoint.objects.filter(pk=endpoint.pk).update(
        base_url="https://alice:pa55word@door.example.org:2880/pnfs?authz=tok3n",
        credential_kind="token",
        credential="eyJhbGciOiJFUzI1NiJ9.c2VjcmV0LXRva2Vu.c2ln",
    )
    campaign = CampaignFactory(name='=HYPERLINK("http://evil")', endpoints=[endpoint])
    message = "open failed: https://alice:pa55word@door.example.org:2880/pnfs/f?authz=tok3n"
    failed("auth", message, test_file=test_file, campaign=campaign)
    answer = viewer.get("/api/v1/runs/csv/")
    text = b"".join(answer.streaming_content).decode()
    for secret in ("pa55word", "tok3n", "alice:", "c2VjcmV0LXRva2Vu"):
        assert secret not in text
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert row["endpoint_url"] == "https://door.example.org:2880/pnfs"
    assert row["campaign"] == '\'=HYPERLINK("http://evil")'
    assert "door.example.org" in row["error_message"]


def test_csv_answers_400_naming_a_bad_ordering_and_asks_for_a_login(viewer: APIClient) -> None:
    answer = viewer.get("/api/v1/runs/csv/", {"ordering": "nope"})
    assert answer.status_code == 400 and "ordering" in answer.json()
    assert APIClient().get("/api/v1/runs/csv/").status_code in (401, 403)


def test_csv_with_accept_text_csv(viewer: APIClient, triage_runs: dict[str, Run]) -> None:
    answer = viewer.get("/api/v1/runs/csv/", HTTP_ACCEPT="text/csv")
    assert len(csv_rows(answer)) == len(triage_runs)
