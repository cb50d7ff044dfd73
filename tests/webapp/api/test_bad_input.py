"""Malformed input answers 400 naming the problem, never 5xx, on PostgreSQL and on the
embedded SQLite database alike: JSON nested deeper than the parser recurses, and ids past
the 64-bit range of the database's integers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.api.test_api import campaign_body, client_for
from tests.webapp.factories import CampaignFactory, EndpointFactory, RunFactory
from webapp.campaigns.models import Run

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000
HUGE = str(2**63)


@pytest.fixture
def operator() -> APIClient:
    return client_for("operator")


@pytest.mark.parametrize(
    "body", [DEEP, DEEP + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000]
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/v1/sites/"),
        ("post", "/api/v1/endpoints/"),
        ("post", "/api/v1/vantage-points/"),
        ("post", "/api/v1/campaigns/"),
        ("put", "/api/v1/sites/{site}/"),
        ("patch", "/api/v1/endpoints/{endpoint}/"),
        ("patch", "/api/v1/campaigns/{campaign}/"),
        ("post", "/api/v1/campaigns/{campaign}/launch/"),
        ("post", "/api/v1/runs/{run}/cancel/"),
    ],
)
def test_deeply_nested_json_answers_400_naming_the_nesting(
    method: str, path: str, body: str
) -> None:
    admin = client_for("admin")  # may edit rows it does not own
    run = RunFactory(status=Run.Status.SUCCEEDED)
    path = path.format(
        site=run.endpoint.site_id, endpoint=run.endpoint_id, campaign=run.campaign_id, run=run.pk
    )
    answer = getattr(admin, method)(path, body, content_type="application/json")
    # 409: the run has already ended, nothing to cancel (the body was read without harm).
    assert answer.status_code in (400, 201, 202, 409), answer.content[:300]
    if answer.status_code == 400:
        assert "nested" in answer.json()["detail"]


def test_a_write_with_deeply_nested_json_creates_nothing(operator: APIClient) -> None:
    answer = operator.post("/api/v1/sites/", DEEP, content_type="application/json")
    assert answer.status_code == 400
    assert "nested" in answer.json()["detail"]


def test_ordinary_nesting_is_still_parsed(operator: APIClient) -> None:
    answer = operator.post("/api/v1/campaigns/", campaign_body(), format="json")
    assert answer.status_code == 201, answer.json()


@pytest.mark.parametrize("value", [HUGE, str(2**64), "9" * 40])
def test_a_huge_endpoint_id_in_series_answers_400_naming_endpoint(
    operator: APIClient, value: str
) -> None:
    answer = operator.get("/api/v1/series/", {"endpoint": value, "metric": "throughput_mbps"})
    assert answer.status_code == 400, answer.content[:300]
    assert "endpoint" in answer.json()


@pytest.mark.parametrize("value", [HUGE, str(2**64), "9" * 40])
def test_a_huge_endpoint_id_in_campaign_results_answers_400_naming_endpoint(
    operator: APIClient, value: str
) -> None:
    campaign = CampaignFactory(endpoints=[EndpointFactory()])
    answer = operator.get(f"/api/v1/campaigns/{campaign.pk}/results/", {"endpoint": value})
    assert answer.status_code == 400, answer.content[:300]
    assert "endpoint" in answer.json()
    browser = Client()
    browser.force_login(User.objects.get(username="operator-user"))
    page = browser.get(f"/campaigns/{campaign.pk}/results/", {"endpoint": value})
    assert page.status_code == 400
    assert "endpoint" in page.content.decode()


@pytest.mark.parametrize("name", ["campaign", "endpoint"])
def test_a_huge_id_filtering_runs_is_not_a_server_error(operator: APIClient, name: str) -> None:
    answer = operator.get("/api/v1/runs/", {name: HUGE})
    assert answer.status_code in (200, 400), answer.content[:300]


@pytest.mark.parametrize(
    "path", ["/api/v1/runs/{}/", "/api/v1/campaigns/{}/", "/api/v1/campaigns/{}/results/"]
)
def test_a_huge_id_in_a_path_is_not_found(operator: APIClient, path: str) -> None:
    assert operator.get(path.format(HUGE)).status_code == 404


@pytest.mark.parametrize(
    "value",
    ["0150-07-10T08:43:50.18+16:01", "2026-01-01T00:00:00-23:59", "0001-01-01T00:00:00+01:00"],
)
@pytest.mark.parametrize("name", ["created_after", "created_before"])
def test_a_time_with_any_offset_filters_runs_without_a_server_error(
    operator: APIClient, name: str, value: str
) -> None:
    RunFactory()
    answer = operator.get("/api/v1/runs/", {name: value})
    assert answer.status_code in (200, 400), answer.content[:300]
    if answer.status_code == 400:
        assert name in answer.json()


def test_an_offset_past_postgresql_s_range_still_filters(operator: APIClient) -> None:
    run = RunFactory()
    later = run.created_at.replace(year=run.created_at.year + 1).strftime("%Y-%m-%dT%H:%M:%S")
    answer = operator.get("/api/v1/runs/", {"created_before": f"{later}+16:30"})
    assert answer.status_code == 200
    assert [row["id"] for row in answer.json()["results"]] == [run.pk]
