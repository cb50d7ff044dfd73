"""The campaign results page and its API view: roles, bad query parameters, the same numbers."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import CampaignFactory, RunFactory, SiteFactory, TestFileFactory
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import Campaign, Run
from webapp.dashboards.selectors.results import campaign_results

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

HOSTILE = "<img src=x onerror=alert(1)>"


def api_client(role: str | None) -> APIClient:
    client = APIClient()
    if role is not None:
        user = User.objects.create_user(f"{role}-api", password="x")
        user.groups.add(Group.objects.get(name=role))
        client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def page_client(role: str) -> Client:
    user = User.objects.create_user(f"{role}-page", password="x")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def campaign() -> Campaign:
    test_file = TestFileFactory(endpoint__site=SiteFactory(name=HOSTILE))
    campaign = CampaignFactory(endpoints=[test_file.endpoint], methods=["direct", "copy"])
    for method, fraction, wall_s in (
        ("direct", 0.5, 1.0),
        ("direct", 1.0, 4.0),
        ("copy", 0.5, 2.0),
        ("copy", 1.0, 2.0),
    ):
        RunFactory(
            campaign=campaign,
            test_file=test_file,
            method=method,
            fraction=fraction,
            status=Run.Status.SUCCEEDED,
            wall_s=wall_s,
        )
    RunFactory(
        campaign=campaign,
        test_file=test_file,
        status=Run.Status.TIMEOUT,
        errors=[{"class": "timeout", "message": "slow", "client": 0}],
    )
    return campaign


def results_url(campaign: Campaign, api: bool = False) -> str:
    return f"{'/api/v1' if api else ''}/campaigns/{campaign.pk}/results/"


def test_a_viewer_reads_the_selectors_numbers_from_the_api(campaign: Campaign) -> None:
    answer = api_client("viewer").get(results_url(campaign, api=True))
    assert answer.status_code == 200
    data = answer.json()
    assert data == json.loads(json.dumps(campaign_results(campaign=campaign).to_json()))
    assert {(c["method"], c["fraction"], c["wall_s"]) for c in data["cells"]} == {
        ("direct", 0.5, 1.0),
        ("direct", 1.0, 4.0),
        ("copy", 0.5, 2.0),
        ("copy", 1.0, 2.0),
    }
    (found,) = data["crossovers"]
    assert found["crossover_fraction"] == pytest.approx(2 / 3)
    assert [(f["error_class"], f["runs"]) for f in data["failures"]] == [("timeout", 1)]
    assert data["endpoints"][0]["site"] == HOSTILE


def test_the_api_filters_the_runs_read(campaign: Campaign) -> None:
    answer = api_client("viewer").get(
        results_url(campaign, api=True), {"method": "copy", "fraction": ["0.5", "1"]}
    )
    assert answer.status_code == 200
    assert {c["method"] for c in answer.json()["cells"]} == {"copy"}
    assert answer.json()["crossovers"] == []


def test_anonymous_users_get_nothing(campaign: Campaign) -> None:
    answer = api_client(None).get(results_url(campaign, api=True))
    assert answer.status_code in (401, 403)
    assert "cells" not in answer.content.decode()


def test_a_user_without_a_role_gets_nothing(campaign: Campaign) -> None:
    user = User.objects.create_user("nobody", password="x")
    client = APIClient()
    client.force_authenticate(user)
    assert client.get(results_url(campaign, api=True)).status_code == 403


def test_the_results_api_only_reads(campaign: Campaign) -> None:
    answer = api_client("operator").post(results_url(campaign, api=True), {})
    assert answer.status_code == 405


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"method": "teleport"}, "method"),
        ({"pattern": "zigzag"}, "pattern"),
        ({"read_size": "4k"}, "read_size"),
        ({"read_size": "0"}, "read_size"),
        ({"fraction": "0"}, "fraction"),
        ({"fraction": "1.5"}, "fraction"),
        ({"fraction": "nan"}, "fraction"),
        ({"clients": "100000"}, "clients"),
        ({"endpoint": "lab"}, "endpoint"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-02-02", "until": "2026-02-01"}, "until"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(
    campaign: Campaign, query: dict[str, str], field: str
) -> None:
    answer = api_client("viewer").get(results_url(campaign, api=True), query)
    assert answer.status_code == 400
    assert list(answer.json()) == [field]
    page = page_client("viewer").get(results_url(campaign), query)
    assert page.status_code == 400
    assert f"<strong>{field}</strong>" in page.content.decode()


def test_an_unknown_campaign_is_a_404() -> None:
    assert api_client("viewer").get("/api/v1/campaigns/999999/results/").status_code == 404
    assert page_client("viewer").get("/campaigns/999999/results/").status_code == 404


def test_the_results_api_is_in_the_openapi_schema() -> None:
    schema = api_client("viewer").get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/campaigns/{id}/results/"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"id", "method", "pattern", "read_size", "fraction", "clients", "endpoint"} <= names
    assert {"vantage_point", "since", "until"} <= names


def test_the_results_api_answers_exactly_the_fields_its_schema_publishes(
    campaign: Campaign,
) -> None:
    """The dimensions and the cells' parameters follow RUN_PARAMETERS in the selector and in
    the published schema alike: a parameter added to one shows in the other."""
    client = api_client("viewer")
    schemas = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["components"]
    published = {name: set(s.get("properties", ())) for name, s in schemas["schemas"].items()}
    answer = client.get(results_url(campaign, api=True)).json()
    assert set(answer["dimensions"]) == published["ResultsDimensions"]
    assert answer["cells"]
    for cell in answer["cells"]:
        assert set(cell) == published["ResultsCell"]


def page_data(html: str) -> Any:
    match = re.search(r'<script id="results-data" type="application/json">(.*?)</script>', html)
    assert match, "no results-data"
    return json.loads(match.group(1))


def test_the_page_carries_the_selectors_data_as_json(
    campaign: Campaign, django_assert_max_num_queries: Any
) -> None:
    client = page_client("viewer")
    # One more than before issue 19: the selector counts the campaign's endpoints (the answer
    # in words is a fragment of its own, fetched by the page's script).
    with django_assert_max_num_queries(9):
        page = client.get(results_url(campaign))
    assert page.status_code == 200
    html = page.content.decode()
    expected = json.loads(json.dumps(campaign_results(campaign=campaign).to_json()))
    assert page_data(html) == expected
    assert HOSTILE not in html  # the site's name is escaped, in the JSON too
    assert 'src="/static/js/campaign_results.js"' in html
    # Drawn: what its runs measured (two fractions, though the campaign now asks for one;
    # copies); the rest is one line each under "Not drawn", never an empty frame.
    for chart in ("fraction", "bytes", "errors"):
        assert f'id="chart-{chart}"' in html
    for chart in ("read-size", "throughput", "open", "doors", "latency"):
        assert f'id="chart-{chart}"' not in html
        assert f'<li data-chart="{chart}">' in html


def test_the_page_reads_only_the_chosen_days(campaign: Campaign) -> None:
    page = page_client("viewer").get(results_url(campaign), {"since": "2999-01-01"})
    assert page.status_code == 200
    assert page_data(page.content.decode())["cells"] == []


def test_the_page_needs_a_login(campaign: Campaign) -> None:
    answer = Client().get(results_url(campaign))
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
    user = User.objects.create_user("nobody", password="x")
    client = Client()
    client.force_login(user)
    assert client.get(results_url(campaign)).status_code == 403


def test_the_campaign_page_links_its_results(campaign: Campaign) -> None:
    page = page_client("viewer").get(f"/campaigns/{campaign.pk}/")
    assert f'href="/campaigns/{campaign.pk}/results/"' in page.content.decode()
