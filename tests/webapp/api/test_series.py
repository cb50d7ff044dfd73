"""/api/v1/series/ (the README's example): medians on every database, the fraction filter, and
one parameter set per series unless mix=1. On PostgreSQL, and on the embedded SQLite database
in bin/test's SQLite stage (marker `sqlite`)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.webapp.api.test_api import client_for
from tests.webapp.factories import RunFactory, TestFileFactory
from webapp.campaigns.models import Run
from webapp.campaigns.selectors import endpoint_series
from webapp.sites.models import Endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

SMALL_DIRECT = {"method": "direct", "pattern": "random", "read_size": 4096, "fraction": 0.1}
LARGE_COPY = {"method": "copy", "pattern": "sequential", "read_size": 1048576, "fraction": 1.0}


@pytest.fixture
def operator() -> APIClient:
    return client_for("operator")


def measured(endpoint: Endpoint, throughput_mbps: float, **parameters: Any) -> Run:
    test_file = endpoint.files.first()
    return RunFactory(
        test_file=test_file,
        status=Run.Status.SUCCEEDED,
        throughput_mbps=throughput_mbps,
        **{"clients": 1, **SMALL_DIRECT, **parameters},
    )


def series(client: APIClient, **query: Any) -> list[dict[str, Any]]:
    answer = client.get("/api/v1/series/", {"metric": "throughput_mbps", **query})
    assert answer.status_code == 200, answer.json()
    return answer.json()


def test_series_has_medians_on_this_database(operator: APIClient) -> None:
    endpoint = TestFileFactory().endpoint
    for value in (1.0, 2.0, 9.0):
        measured(endpoint, value)
    ((point,),) = [s["points"] for s in series(operator, endpoint=endpoint.pk)]
    assert (point["n"], point["median"], point["mean"], point["min"], point["max"]) == (
        3,
        2.0,
        4.0,
        1.0,
        9.0,
    )


def test_series_is_of_one_parameter_set_unless_mix_is_asked(operator: APIClient) -> None:
    """4 KiB direct reads and 1 MiB copies of one endpoint are not averaged together."""
    endpoint = TestFileFactory().endpoint
    for value in (1.5, 1.6, 1.7):
        measured(endpoint, value)
    measured(endpoint, 968.0, **LARGE_COPY)

    (default,) = series(operator, endpoint=endpoint.pk)
    assert default["parameter_set"] == {
        "operation": "read",
        **SMALL_DIRECT,
        "clients": 1,
        "address_family": "any",
    }
    assert [(p["n"], p["max"]) for p in default["points"]] == [(3, 1.7)]

    (copies,) = series(operator, endpoint=endpoint.pk, method="copy")
    assert copies["parameter_set"] == {
        "operation": "read",
        **LARGE_COPY,
        "clients": 1,
        "address_family": "any",
    }
    assert [(p["n"], p["median"]) for p in copies["points"]] == [(1, 968.0)]

    (mixed,) = series(operator, endpoint=endpoint.pk, mix=1)
    assert mixed["parameter_set"] is None
    assert [(p["n"], p["min"], p["max"]) for p in mixed["points"]] == [(4, 1.5, 968.0)]

    # Runs pinned to IPv6 are a parameter set of their own, asked for by their family.
    measured(endpoint, 0.5, address_family="6")
    (pinned,) = series(operator, endpoint=endpoint.pk, address_family="6")
    assert pinned["parameter_set"]["address_family"] == "6"
    assert [(p["n"], p["max"]) for p in pinned["points"]] == [(1, 0.5)]
    (default,) = series(operator, endpoint=endpoint.pk)
    assert [(p["n"], p["max"]) for p in default["points"]] == [(3, 1.7)]
    refused = operator.get(
        "/api/v1/series/",
        {"metric": "throughput_mbps", "endpoint": endpoint.pk, "address_family": "each"},
    )
    assert refused.status_code == 400 and list(refused.json()) == ["address_family"]


def test_one_parameter_set_is_shared_by_every_endpoint(operator: APIClient) -> None:
    first, second = TestFileFactory().endpoint, TestFileFactory().endpoint
    measured(first, 1.0)
    measured(first, 2.0)
    measured(second, 3.0)
    measured(second, 500.0, **LARGE_COPY)
    answer = series(operator, endpoint=[first.pk, second.pk])
    assert [s["parameter_set"]["method"] for s in answer] == ["direct", "direct"]
    assert [[p["median"] for p in s["points"]] for s in answer] == [[1.5], [3.0]]


def test_series_filters_by_fraction(operator: APIClient) -> None:
    endpoint = TestFileFactory().endpoint
    measured(endpoint, 10.0, fraction=0.1)
    measured(endpoint, 11.0, fraction=0.1)
    measured(endpoint, 40.0, fraction=0.5)
    (half,) = series(operator, endpoint=endpoint.pk, fraction=0.5)
    assert half["parameter_set"]["fraction"] == 0.5
    assert [(p["n"], p["median"]) for p in half["points"]] == [(1, 40.0)]
    bad = operator.get(
        "/api/v1/series/", {"endpoint": endpoint.pk, "metric": "wall_s", "fraction": 0}
    )
    assert bad.status_code == 400 and "fraction" in bad.json()


def test_a_series_without_runs_has_no_parameter_set(operator: APIClient) -> None:
    endpoint = TestFileFactory().endpoint
    (empty,) = series(operator, endpoint=endpoint.pk)
    assert empty["parameter_set"] is None and empty["points"] == []


def test_series_selector_reads_in_two_queries(django_assert_num_queries: Any) -> None:
    """One for the parameter set, one for the points, whatever the number of runs."""
    endpoint = TestFileFactory().endpoint
    for value in (1.0, 2.0, 3.0):
        measured(endpoint, value)
    with django_assert_num_queries(2):
        endpoint_series(endpoint_ids=[endpoint.pk], metric="throughput_mbps")
