"""The REST API: roles, bounds naming the field with nothing created, launch, runs, series."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from tests.contract import RUN_KEYS
from tests.webapp.factories import (
    RunFactory,
    SiteFactory,
    TestFileFactory,
)
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, Site, VantagePoint

pytestmark = pytest.mark.django_db


def client_for(role: str | None) -> APIClient:
    client = APIClient()
    if role is None:
        return client
    user = User.objects.create_user(f"{role}-user", password="x")
    user.groups.add(Group.objects.get(name=role))
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


@pytest.fixture
def operator() -> APIClient:
    return client_for("operator")


def campaign_body(**changes: Any) -> dict[str, Any]:
    test_file = TestFileFactory()
    body: dict[str, Any] = {
        "name": "nightly",
        "endpoints": [test_file.endpoint_id],
        "methods": ["direct", "copy"],
        "patterns": ["random"],
        "read_sizes": [4096, 1048576],
        "fractions": [0.1],
        "clients": [1, 4],
    }
    body.update(changes)
    return body


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/sites/",
        "/api/v1/endpoints/",
        "/api/v1/campaigns/",
        "/api/v1/runs/",
        "/api/v1/vantage-points/",
        "/api/schema/",
    ],
)
def test_anonymous_users_see_nothing(path: str) -> None:
    assert client_for(None).get(path).status_code in (401, 403)


def test_viewer_reads_but_cannot_write() -> None:
    SiteFactory(name="CERN")
    viewer = client_for("viewer")
    listed = viewer.get("/api/v1/sites/")
    assert listed.status_code == 200
    assert [s["name"] for s in listed.json()["results"]] == ["CERN"]
    assert viewer.post("/api/v1/sites/", {"name": "X"}).status_code == 403
    assert not Site.objects.filter(name="X").exists()


def test_operator_creates_a_campaign_and_sees_its_matrix(operator: APIClient) -> None:
    answer = operator.post("/api/v1/campaigns/", campaign_body(), format="json")
    assert answer.status_code == 201, answer.json()
    data = answer.json()
    assert data["matrix_size"] == 1 * 1 * 2 * 1 * 2 * 1 * 2  # file, vp, methods, sizes, clients
    assert data["planned_bytes"] > 0
    assert data["vantage_points"] == [VantagePoint.objects.get(name="local").pk]


def test_a_campaign_schedule_is_a_cron_string(operator: APIClient) -> None:
    answer = operator.post(
        "/api/v1/campaigns/", campaign_body(schedule=" 30 2 * * mon-fri "), format="json"
    )
    assert answer.status_code == 201, answer.json()
    assert Campaign.objects.get().schedule == "30 2 * * mon-fri"
    refused = operator.patch(
        f"/api/v1/campaigns/{answer.json()['id']}/", {"schedule": "30 25 * * *"}, format="json"
    )
    assert refused.json() == {"schedule": ["hour: 25 is outside 0-23"]}
    assert Campaign.objects.get().schedule == "30 2 * * mon-fri"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"clients": [0]}, "clients"),
        ({"clients": [257]}, "clients"),
        ({"clients": []}, "clients"),
        ({"fractions": [0]}, "fractions"),
        ({"fractions": [1.5]}, "fractions"),
        ({"read_sizes": [0]}, "read_sizes"),
        ({"read_sizes": [64 * 1024 * 1024 + 1]}, "read_sizes"),
        ({"methods": ["teleport"]}, "methods"),
        ({"patterns": ["zigzag"]}, "patterns"),
        ({"depth": 0}, "depth"),
        ({"vector_size": 1025}, "vector_size"),
        ({"deadline_s": 6 * 3600 + 1}, "deadline_s"),
        ({"endpoints": []}, "endpoints"),
        ({"endpoints": [999999]}, "endpoints"),
        ({"name": ""}, "name"),
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"schedule": "0 2 * *"}, "schedule"),
        ({"schedule": "0 0 30 2 *"}, "schedule"),
    ],
)
def test_bad_campaign_is_refused_naming_the_field_and_creates_nothing(
    operator: APIClient, changes: dict[str, Any], field: str
) -> None:
    answer = operator.post("/api/v1/campaigns/", campaign_body(**changes), format="json")
    assert answer.status_code == 400
    assert field in answer.json()
    assert not Campaign.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"protocol": "root", "base_url": "gopher://host:1/"}, "base_url"),
        ({"protocol": "http", "base_url": "root://host:1094/"}, "base_url"),
        ({"protocol": "root", "base_url": "-oProxyCommand=x"}, "base_url"),
        ({"protocol": "teleport", "base_url": "root://host:1094/"}, "protocol"),
        ({"protocol": "root", "base_url": "root://host:1094/", "name": "bad name!"}, "name"),
    ],
)
def test_bad_endpoint_is_refused_naming_the_field(
    operator: APIClient, body: dict[str, Any], field: str
) -> None:
    site = SiteFactory()
    answer = operator.post(
        "/api/v1/endpoints/", {"site": site.pk, "name": "e1", **body}, format="json"
    )
    assert answer.status_code == 400
    assert field in answer.json()
    assert not Endpoint.objects.exists()


def test_launch_answers_with_the_created_run_ids(operator: APIClient) -> None:
    created = operator.post("/api/v1/campaigns/", campaign_body(), format="json").json()
    answer = operator.post(f"/api/v1/campaigns/{created['id']}/launch/")
    assert answer.status_code == 201
    assert sorted(answer.json()["runs"]) == sorted(Run.objects.values_list("pk", flat=True))
    assert len(answer.json()["runs"]) == created["matrix_size"]


def test_launch_over_the_cap_is_refused_and_creates_no_run(
    operator: APIClient, settings: Any
) -> None:
    created = operator.post("/api/v1/campaigns/", campaign_body(), format="json").json()
    settings.FEDPROBE_MAX_MATRIX = 2  # lowered after the campaign was made
    answer = operator.post(f"/api/v1/campaigns/{created['id']}/launch/")
    assert answer.status_code == 400
    assert "matrix" in answer.json()
    assert not Run.objects.exists()


def test_a_campaign_over_the_cap_is_refused_at_creation_and_on_change(
    operator: APIClient, settings: Any
) -> None:
    settings.FEDPROBE_MAX_MATRIX = 4
    answer = operator.post("/api/v1/campaigns/", campaign_body(), format="json")
    assert answer.status_code == 400
    assert "8 runs exceed the limit of 4" in answer.json()["matrix"][0]
    assert not Campaign.objects.exists()
    created = operator.post(
        "/api/v1/campaigns/", campaign_body(methods=["direct"], clients=[1]), format="json"
    ).json()
    grown = operator.patch(
        f"/api/v1/campaigns/{created['id']}/", {"clients": [1, 2, 4]}, format="json"
    )
    assert grown.status_code == 400 and "matrix" in grown.json()
    assert Campaign.objects.get().clients == [1]


def test_any_operator_may_launch_but_only_the_owner_may_edit(operator: APIClient) -> None:
    created = operator.post("/api/v1/campaigns/", campaign_body(), format="json").json()
    other_user = User.objects.create_user("other-operator")
    other_user.groups.add(Group.objects.get(name="operator"))
    other = APIClient()
    other.force_authenticate(other_user)
    assert other.post(f"/api/v1/campaigns/{created['id']}/launch/").status_code == 201
    renamed = other.patch(f"/api/v1/campaigns/{created['id']}/", {"name": "x"}, format="json")
    assert renamed.status_code == 403
    assert (
        client_for("viewer").post(f"/api/v1/campaigns/{created['id']}/launch/").status_code == 403
    )


def test_run_list_filters_and_run_detail_carries_the_run_json(operator: APIClient) -> None:
    done = RunFactory(status=Run.Status.SUCCEEDED, throughput_mbps=12.5, latency_p50_us=210.0)
    RunFactory(status=Run.Status.FAILED)
    listed = operator.get("/api/v1/runs/", {"status": "succeeded"}).json()
    assert [r["id"] for r in listed["results"]] == [done.pk]
    detail = operator.get(f"/api/v1/runs/{done.pk}/").json()
    assert detail.keys() >= RUN_KEYS
    assert detail["op_latency_us"]["p50"] == 210.0


def test_cancel_of_a_queued_run(operator: APIClient) -> None:
    run = RunFactory()  # of a campaign of the operator's: its owner may cancel its runs
    Campaign.objects.filter(pk=run.campaign_id).update(
        owner=User.objects.get(username="operator-user")
    )
    answer = operator.post(f"/api/v1/runs/{run.pk}/cancel/")
    assert answer.status_code == 202
    assert answer.json()["status"] == "cancelled"
    assert client_for("viewer").post(f"/api/v1/runs/{run.pk}/cancel/").status_code == 403


def test_series_aggregates_a_metric_per_day_in_the_database(operator: APIClient) -> None:
    test_file = TestFileFactory()
    for value in (10.0, 20.0, 30.0):
        RunFactory(test_file=test_file, status=Run.Status.SUCCEEDED, throughput_mbps=value)
    RunFactory(test_file=test_file, status=Run.Status.CANCELLED, throughput_mbps=999.0)
    answer = operator.get(
        "/api/v1/series/", {"endpoint": test_file.endpoint_id, "metric": "throughput_mbps"}
    )
    assert answer.status_code == 200, answer.json()
    (series,) = answer.json()
    (point,) = series["points"]
    assert (point["n"], point["mean"], point["min"], point["max"]) == (3, 20.0, 10.0, 30.0)
    assert point["median"] == 20.0
    bad = operator.get("/api/v1/series/", {"endpoint": test_file.endpoint_id, "metric": "x"})
    assert bad.status_code == 400
    assert "metric" in bad.json()


def test_pagination_has_a_maximum(operator: APIClient) -> None:
    VantagePoint.objects.bulk_create(VantagePoint(name=f"vp{i}") for i in range(501))
    answer = operator.get("/api/v1/vantage-points/", {"limit": 100000}).json()
    assert answer["count"] == 501
    assert len(answer["results"]) == 500


def test_openapi_schema_validates() -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_endpoint_lists_its_test_files(operator: APIClient) -> None:
    test_file = TestFileFactory(path="/data/f", size=10, adler32="0000abcd")
    detail = operator.get(f"/api/v1/endpoints/{test_file.endpoint_id}/").json()
    assert detail["files"][0]["url"].endswith("//data/f")
    assert detail["files"][0]["adler32"] == "0000abcd"


def test_endpoint_credential_is_accepted_encrypted_and_never_shown(operator: APIClient) -> None:
    site = SiteFactory(owner=User.objects.get(username="operator-user"))
    body = {
        "site": site.pk,
        "name": "secure",
        "protocol": "https",
        "base_url": "https://se.example.org:443/",
        "credential_kind": "token",
        "credential": "bearer-s3cret",
    }
    created = operator.post("/api/v1/endpoints/", body, format="json")
    assert created.status_code == 201, created.json()
    assert "bearer-s3cret" not in created.content.decode()
    assert created.json()["has_credential"] is True
    listed = operator.get("/api/v1/endpoints/").content.decode()
    assert "bearer-s3cret" not in listed
    with connection.cursor() as cursor:
        cursor.execute("SELECT credential FROM sites_endpoint WHERE name = 'secure'")
        (stored,) = cursor.fetchone()
    assert "bearer-s3cret" not in stored
    assert Endpoint.objects.get(name="secure").credential == "bearer-s3cret"
