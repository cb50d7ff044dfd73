"""Compare over time: the selector against PostgreSQL with known runs, its query counts, the
form's bounds, and the page and API views (same numbers, roles, 400 naming the field)."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
)
from tests.webapp.sqlite import only_on_postgresql
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import Run
from webapp.campaigns.selectors import percentile
from webapp.dashboards.forms import CompareForm
from webapp.dashboards.selectors.compare import MAX_ENDPOINTS, compare_data
from webapp.sites.models import Endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

DAY = date(2026, 3, 10)
SET = {
    "operation": "read",
    "method": "direct",
    "pattern": "random",
    "read_size": 4096,
    "fraction": 0.01,
    "clients": 1,
    "address_family": "any",
}
OTHER = {**SET, "method": "copy", "pattern": "sequential", "read_size": 1 << 20, "fraction": 1.0}


def at(day: date, hour: int = 2) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def run(
    endpoint: Endpoint, day: date, *, status: str = "succeeded", hour: int = 2, **fields: Any
) -> Run:
    """A finished run of SET (unless fields say otherwise) created on `day`."""
    test_file = endpoint.default_file or TestFileFactory(endpoint=endpoint)
    values = {**SET, **fields}
    made = RunFactory(
        endpoint=endpoint,
        test_file=test_file,
        campaign=CAMPAIGN.get(endpoint.pk) or CAMPAIGN.setdefault(endpoint.pk, CampaignFactory()),
        status=status,
        **values,
    )
    Run.objects.filter(pk=made.pk).update(created_at=at(day, hour))
    made.refresh_from_db()
    return made


CAMPAIGN: dict[int, Any] = {}


@pytest.fixture(autouse=True)
def _fresh_campaigns() -> None:
    CAMPAIGN.clear()


def data(endpoints: list[Endpoint], **changes: Any) -> dict[str, Any]:
    query: dict[str, Any] = {
        "endpoints": endpoints,
        "metric": "throughput_mbps",
        "since": DAY - timedelta(days=40),
        "until": DAY,
        "parameters": {},
    }
    query.update(changes)
    return compare_data(**query)


def series_of(result: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    return next(s for s in result["series"] if s["endpoint"] == endpoint.pk)


def test_median_and_quartiles_per_day_as_percentile_cont() -> None:
    endpoint = EndpointFactory()
    for value in (10.0, 40.0, 20.0, 30.0):
        run(endpoint, DAY, throughput_mbps=value)
    run(endpoint, DAY - timedelta(days=1), throughput_mbps=7.0)
    series = series_of(data([endpoint]), endpoint)
    assert series["t"] == [str(DAY - timedelta(days=1)), str(DAY)]
    assert series["n"] == [1, 4]
    assert series["median"] == [7.0, 25.0]
    assert series["q1"] == [7.0, 17.5]
    assert series["q3"] == [7.0, 32.5]


def test_server_version_narrows_to_the_runs_after_an_upgrade_and_each_run_shows_it() -> None:
    endpoint = EndpointFactory()
    run(endpoint, DAY - timedelta(days=2), throughput_mbps=100.0, server_version="XRootD v5.5.3")
    run(endpoint, DAY - timedelta(days=1), throughput_mbps=40.0, server_version="XRootD v5.6.1")
    run(endpoint, DAY, throughput_mbps=44.0, server_version="XRootD v5.6.1")
    upgraded = data([endpoint], server_version="v5.6")
    assert series_of(upgraded, endpoint)["median"] == [40.0, 44.0]
    assert upgraded["server_version"] == "v5.6"
    everything = data([endpoint], since=DAY - timedelta(days=5))
    assert [r["server_version"] for r in everything["runs"]] == [
        "XRootD v5.5.3",
        "XRootD v5.6.1",
        "XRootD v5.6.1",
    ]


def test_the_compare_api_takes_server_version() -> None:
    endpoint = EndpointFactory()
    run(endpoint, DAY, throughput_mbps=10.0, server_version="dCache 9.2")
    run(endpoint, DAY, throughput_mbps=30.0, server_version="dCache 10.0")
    api = api_client("viewer")
    query = f"endpoint={endpoint.pk}&since={DAY}&until={DAY}&server_version=dCache%2010"
    answer = api.get(f"/api/v1/compare/?{query}")
    assert answer.status_code == 200, answer.content
    assert [r["value"] for r in answer.json()["runs"]] == [30.0]


def test_failed_runs_are_failures_not_values() -> None:
    endpoint = EndpointFactory()
    run(endpoint, DAY, throughput_mbps=10.0)
    run(endpoint, DAY, throughput_mbps=20.0, status="partial")
    run(endpoint, DAY, status="failed", errors=[{"class": "refused", "message": "no"}])
    run(endpoint, DAY, status="failed", errors=[{"class": "refused", "message": "no"}])
    run(endpoint, DAY, status="timeout", errors=[{"class": "timeout", "message": "late"}])
    run(endpoint, DAY, status="cancelled")
    run(endpoint, DAY, status="running")
    result = data([endpoint])
    assert series_of(result, endpoint)["n"] == [2]
    assert series_of(result, endpoint)["median"] == [15.0]
    failures = {(f["status"], f["error_class"]): f["n"] for f in result["failures"]}
    assert failures == {("failed", "refused"): 2, ("timeout", "timeout"): 1, ("cancelled", ""): 1}
    assert {f["day"] for f in result["failures"]} == {str(DAY)}


def test_only_the_chosen_parameter_set_and_by_default_the_most_measured() -> None:
    endpoint = EndpointFactory()
    run(endpoint, DAY, throughput_mbps=1.0)
    run(endpoint, DAY, throughput_mbps=3.0)
    run(endpoint, DAY, throughput_mbps=500.0, **OTHER)
    result = data([endpoint])
    assert result["parameter_set"] == SET
    assert series_of(result, endpoint)["median"] == [2.0]
    assert [(s["method"], s["runs"]) for s in result["parameter_sets"]] == [
        ("direct", 2),
        ("copy", 1),
    ]
    chosen = data([endpoint], parameters={"method": "copy"})
    assert chosen["parameter_set"] == OTHER
    assert series_of(chosen, endpoint)["median"] == [500.0]
    named = data([endpoint], parameters={**SET, "clients": 64})
    assert named["parameter_set"] == {**SET, "clients": 64}
    assert named["series"] == []


def test_nothing_measured_means_no_parameter_set_and_no_data() -> None:
    endpoint = EndpointFactory()
    run(endpoint, DAY - timedelta(days=100), throughput_mbps=1.0)
    result = data([endpoint])
    assert result["parameter_set"] is None
    assert result["series"] == result["failures"] == result["runs"] == []


def test_range_is_whole_utc_days_and_runs_drawn_only_for_short_ranges() -> None:
    endpoint = EndpointFactory()
    first = run(endpoint, DAY - timedelta(days=30), hour=0, throughput_mbps=1.0)
    last = run(endpoint, DAY, hour=23, throughput_mbps=2.0)
    run(endpoint, DAY + timedelta(days=1), hour=0, throughput_mbps=3.0)
    run(endpoint, DAY - timedelta(days=31), hour=23, throughput_mbps=4.0)
    month = data([endpoint], since=DAY - timedelta(days=30))
    assert month["runs_shown"] is True
    assert [r["id"] for r in month["runs"]] == [first.pk, last.pk]
    assert [r["value"] for r in month["runs"]] == [1.0, 2.0]
    longer = data([endpoint], since=DAY - timedelta(days=31))
    assert longer["runs_shown"] is False
    assert longer["runs"] == []
    assert sum(series_of(longer, endpoint)["n"]) == 3


def test_vantage_point_filter_and_week_buckets() -> None:
    endpoint = EndpointFactory()
    far = VantagePointFactory(name="far")
    run(endpoint, DAY, throughput_mbps=1.0)
    run(endpoint, DAY, throughput_mbps=9.0, vantage_point=far)
    monday = DAY - timedelta(days=DAY.weekday())
    run(endpoint, monday, throughput_mbps=3.0)
    assert series_of(data([endpoint], vantage_point=far), endpoint)["median"] == [9.0]
    weekly = series_of(data([endpoint], bucket="week"), endpoint)
    assert weekly["t"] == [str(monday)]
    assert weekly["median"] == [3.0]


def test_another_metric_is_read_from_its_column() -> None:
    endpoint = EndpointFactory()
    run(endpoint, DAY, throughput_mbps=1.0, open_s=0.25)
    run(endpoint, DAY, throughput_mbps=1.0, open_s=None)
    result = data([endpoint], metric="open_s")
    assert (result["unit"], series_of(result, endpoint)["median"]) == ("s", [0.25])


def test_selector_queries_are_bounded(django_assert_num_queries: Any) -> None:
    endpoints = [EndpointFactory() for _ in range(5)]
    for endpoint in endpoints:
        for days in range(40):
            run(endpoint, DAY - timedelta(days=days), throughput_mbps=float(days))
        run(endpoint, DAY, status="failed")
    with django_assert_num_queries(3):  # parameter sets, days, failures
        long = data(endpoints)
    assert len(long["series"]) == 5
    with django_assert_num_queries(4):  # and the runs
        short = data(endpoints, since=DAY - timedelta(days=6))
    assert len(short["runs"]) == 5 * 7


@only_on_postgresql
def test_python_percentile_agrees_with_postgresql_percentile_cont() -> None:
    rng = random.Random(4)
    for size in (1, 2, 3, 7, 50):
        values = sorted(rng.uniform(0, 100) for _ in range(size))
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY v), "
                "percentile_cont(0.5) WITHIN GROUP (ORDER BY v), "
                "percentile_cont(0.75) WITHIN GROUP (ORDER BY v) FROM unnest(%s::float8[]) v",
                [values],
            )
            expected = cursor.fetchone()
        assert [percentile(values, q) for q in (0.25, 0.5, 0.75)] == pytest.approx(expected)


# The form: what the page and the API accept.


def form(**query: Any) -> CompareForm:
    from django.http import QueryDict

    data = QueryDict(mutable=True)
    for key, value in query.items():
        data.setlist(key, [str(v) for v in value] if isinstance(value, list) else [str(value)])
    return CompareForm(data)


def test_sites_expand_to_their_endpoints_and_protocols_keep_some() -> None:
    site = SiteFactory()
    root = EndpointFactory(site=site, name="a-root")
    http = EndpointFactory(site=site, name="b-http", protocol="http", base_url="http://x:80/")
    lone = EndpointFactory()
    whole = form(site=[site.pk], endpoint=[lone.pk])
    assert whole.is_valid(), whole.errors
    assert set(whole.query()["endpoints"]) == {root, http, lone}
    only_http = form(site=[site.pk], protocol=["http"])
    assert only_http.is_valid(), only_http.errors
    assert only_http.query()["endpoints"] == [http]


def test_form_defaults_to_ninety_days_to_today_and_throughput(
    django_assert_num_queries: Any,
) -> None:
    endpoint = EndpointFactory()
    with django_assert_num_queries(1):
        valid = form(endpoint=[endpoint.pk])
        assert valid.is_valid(), valid.errors
    query = valid.query()
    assert (query["until"] - query["since"]).days == 89
    assert query["metric"] == "throughput_mbps"
    assert query["bucket"] == "day"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({}, "endpoint"),
        ({"endpoint": ["x"]}, "endpoint"),
        ({"endpoint": [999_999]}, "endpoint"),
        ({"site": [999_999]}, "site"),
        ({"metric": "bogus"}, "metric"),
        ({"since": "2026-13-01"}, "since"),
        ({"since": "2026-03-02", "until": "2026-03-01"}, "since"),
        ({"since": "2020-01-01", "until": "2026-03-01"}, "since"),
        ({"bucket": "year"}, "bucket"),
        ({"method": "teleport"}, "method"),
        ({"read_size": 0}, "read_size"),
        ({"fraction": 0}, "fraction"),
        ({"fraction": 1.5}, "fraction"),
        ({"clients": 257}, "clients"),
        ({"vantage_point": "nowhere"}, "vantage_point"),
        ({"protocol": "gopher"}, "protocol"),
    ],
)
def test_bad_input_names_the_field(query: dict[str, Any], field: str) -> None:
    endpoint = EndpointFactory()
    query = {"endpoint": [endpoint.pk], **query} if field != "endpoint" else query
    bad = form(**query)
    assert not bad.is_valid()
    assert field in bad.errors


def test_too_many_endpoints_names_the_field() -> None:
    site = SiteFactory()
    endpoints = [EndpointFactory(site=site) for _ in range(MAX_ENDPOINTS + 1)]
    by_id = form(endpoint=[e.pk for e in endpoints])
    assert not by_id.is_valid()
    assert "at most 20" in by_id.errors["endpoint"][0]
    by_site = form(site=[site.pk])
    assert not by_site.is_valid()
    assert "site" in by_site.errors


# The views.


def api_client(role: str | None) -> APIClient:
    client = APIClient()
    if role:
        user = User.objects.create_user(f"{role}-compare", password="x")
        user.groups.add(Group.objects.get(name=role))
        client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def page_client(role: str) -> Client:
    client = Client()
    user = User.objects.create_user(f"{role}-page", password="x")
    user.groups.add(Group.objects.get(name=role))
    client.force_login(user)
    return client


def test_api_and_page_give_the_same_numbers_to_a_viewer() -> None:
    endpoint = EndpointFactory()
    for value in (5.0, 6.0, 9.0):
        run(endpoint, DAY, throughput_mbps=value)
    query = f"endpoint={endpoint.pk}&since={DAY - timedelta(days=3)}&until={DAY}"
    answer = api_client("viewer").get(f"/api/v1/compare/?{query}")
    assert answer.status_code == 200
    body = answer.json()
    assert body["series"][0]["median"] == [6.0]
    assert body["parameter_set"] == SET
    page = page_client("viewer").get(f"/compare/?{query}")
    assert page.status_code == 200
    html = page.content.decode()
    tag = '<script id="compare-data" type="application/json">'
    start = html.index(tag) + len(tag)
    embedded = json.loads(html[start : html.index("</script>", start)])
    assert embedded == body


def test_page_and_api_queries_are_bounded(django_assert_max_num_queries: Any) -> None:
    site = SiteFactory()
    endpoints = [EndpointFactory(site=site) for _ in range(8)]
    for endpoint in endpoints:
        for days in range(10):
            run(endpoint, DAY - timedelta(days=days), throughput_mbps=1.0 + days)
    query = f"site={site.pk}&since={DAY - timedelta(days=60)}&until={DAY}"
    page, api = page_client("viewer"), api_client("viewer")
    # session, user, role (twice: the view, the context processor); form: endpoints;
    # selector: 3; page: sites, their endpoints, vantage points
    with django_assert_max_num_queries(11):
        assert page.get(f"/compare/?{query}").status_code == 200
    # token, its last_used (written on a first use, then once a minute), role; form: vantage
    # points, endpoints; selector: 3
    with django_assert_max_num_queries(8):
        assert api.get(f"/api/v1/compare/?{query}&vantage_point=local").status_code == 200


def test_anonymous_users_get_neither_page_nor_data() -> None:
    endpoint = EndpointFactory()
    assert api_client(None).get(f"/api/v1/compare/?endpoint={endpoint.pk}").status_code in (
        401,
        403,
    )
    page = Client().get(f"/compare/?endpoint={endpoint.pk}")
    assert page.status_code == 302
    assert "/accounts/login" in page["Location"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("metric=speed", "metric"),
        ("since=yesterday", "since"),
        ("since=2026-03-05&until=2026-03-01", "since"),
        ("read_size=-1", "read_size"),
    ],
)
def test_api_answers_400_naming_the_field(query: str, field: str) -> None:
    endpoint = EndpointFactory()
    answer = api_client("viewer").get(f"/api/v1/compare/?endpoint={endpoint.pk}&{query}")
    assert answer.status_code == 400
    assert field in answer.json()


def test_api_refuses_more_than_the_cap_of_endpoints() -> None:
    ids = "&".join(f"endpoint={EndpointFactory().pk}" for _ in range(MAX_ENDPOINTS + 1))
    answer = api_client("viewer").get(f"/api/v1/compare/?{ids}")
    assert answer.status_code == 400
    assert list(answer.json()) == ["endpoint"]


def test_page_shows_errors_naming_the_field_with_status_400() -> None:
    endpoint = EndpointFactory()
    page = page_client("viewer").get(f"/compare/?endpoint={endpoint.pk}&metric=speed")
    assert page.status_code == 400
    assert b"metric: Select a valid choice" in page.content


def test_page_without_endpoints_says_what_to_do() -> None:
    SiteFactory(name="<b>site</b>")
    page = page_client("viewer").get("/compare/")
    assert page.status_code == 200
    assert b"Pick endpoints or whole sites above" in page.content
    assert b"<b>site</b>" not in page.content


def test_the_read_size_is_chosen_among_the_measured_ones_written_as_sizes() -> None:
    """The field was a number of bytes ("1048576")."""
    endpoint = EndpointFactory()
    run(endpoint, DAY, throughput_mbps=5.0)
    run(endpoint, DAY, throughput_mbps=6.0, **OTHER)
    query = f"endpoint={endpoint.pk}&since={DAY - timedelta(days=3)}&until={DAY}&read_size=4096"
    html = page_client("viewer").get(f"/compare/?{query}").content.decode()
    field = html[
        html.index('<select name="read_size"') : html.index(
            "</select>", html.index('name="read_size"')
        )
    ]
    options = [
        (value, selected, label.strip())
        for value, selected, label in re.findall(
            r'<option value="(\d*)"( selected)?>([^<]*)<', field
        )
    ]
    assert options == [
        ("", "", "most measured"),
        ("4096", " selected", "4 KiB"),
        ("1048576", "", "1 MiB"),
    ]
