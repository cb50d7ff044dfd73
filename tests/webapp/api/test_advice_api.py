"""The advice over the API: an endpoint's and a site's statements, bad queries named, and
the suggested campaign created (not launched) by an operator only."""

from __future__ import annotations

import pytest

from tests.webapp.factories import (
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
    api_for,
    user,
)
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import TestFile, VantagePoint

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


def test_an_endpoints_advice_lists_each_question_with_its_campaign() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    answer = api_for(user("vera", "viewer")).get(
        f"/api/v1/endpoints/{test_file.endpoint.pk}/advice/", {"vantage_point": local.pk}
    )
    assert answer.status_code == 200
    statements = answer.json()["statements"]
    assert [s["question"] for s in statements] == [
        "crossover",
        "knee",
        "latency-hiding",
        "read-ahead",
    ]
    first = statements[0]
    assert first["verdict"] == "too-thin"
    assert first["enough_data"] is False
    assert first["vantage_point"] == local.pk
    assert first["suggested_campaign"]["runs"] == 60
    assert set(first) >= {
        "question",
        "verdict",
        "value",
        "interval",
        "model_prediction",
        "evidence",
        "measured_at",
        "enough_data",
        "suggested_campaign",
    }


def test_a_vantage_point_is_named_by_id_or_name_and_an_unknown_one_is_refused() -> None:
    test_file = TestFileFactory(size=MIB)
    VantagePointFactory(name="cern")
    api = api_for(user("vera", "viewer"))
    url = f"/api/v1/endpoints/{test_file.endpoint.pk}/advice/"
    by_name = api.get(url, {"vantage_point": "cern"}).json()["statements"]
    assert {s["vantage_point"] for s in by_name} == {VantagePointFactory(name="cern").pk}
    for unknown in ("nowhere", "999999", "²", str(2**70), "a\x00b"):
        answer = api.get(url, {"vantage_point": unknown})
        assert answer.status_code == 400, unknown
        assert "vantage_point" in answer.json()


def test_a_sites_advice_covers_its_endpoints() -> None:
    test_file = TestFileFactory(size=MIB)
    http = EndpointFactory(site=test_file.endpoint.site, protocol="http")
    VantagePointFactory()
    answer = api_for(user("vera", "viewer")).get(
        f"/api/v1/sites/{test_file.endpoint.site.pk}/advice/"
    )
    assert answer.status_code == 200
    assert {s["endpoint"] for s in answer.json()["statements"]} == {test_file.endpoint.pk, http.pk}
    assert api_for(user("vera2", "viewer")).get("/api/v1/sites/999999/advice/").status_code == 404


def test_an_operator_creates_the_suggested_campaign_not_launched() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    operator = user("olga", "operator")
    answer = api_for(operator).post(
        f"/api/v1/endpoints/{test_file.endpoint.pk}/advice/campaign/",
        {"question": "crossover", "vantage_point": local.pk},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    campaign = Campaign.objects.get(pk=answer.json()["id"])
    assert campaign.owner == operator
    assert campaign.methods == ["direct", "copy"]
    assert answer.json()["matrix_size"] == 60
    assert not Run.objects.exists()


def test_read_ahead_runs_missing_are_the_ones_suggested() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    RunFactory(
        test_file=test_file,
        vantage_point=local,
        status=Run.Status.SUCCEEDED,
        wall_s=1.0,
        readahead=MIB,
    )
    api = api_for(user("olga", "operator"))
    url = f"/api/v1/endpoints/{test_file.endpoint.pk}/advice/"
    [ahead] = [s for s in api.get(url).json()["statements"] if s["question"] == "read-ahead"]
    assert ahead["suggested_campaign"]["readahead"] == 0
    created = api.post(f"{url}campaign/", {"question": "read-ahead", "vantage_point": local.pk})
    assert created.status_code == 201
    assert created.json()["readahead"] == 0


def test_bad_input_names_the_field_and_creates_nothing() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    url = f"/api/v1/endpoints/{test_file.endpoint.pk}/advice/campaign/"
    api = api_for(user("olga", "operator"))
    for body, field in (
        ({"question": "weather", "vantage_point": local.pk}, "question"),
        ({"question": "cache", "vantage_point": local.pk}, "question"),  # not a cache
        ({"question": "knee", "vantage_point": 999999}, "vantage_point"),
        ({"question": "knee", "vantage_point": "x"}, "vantage_point"),
        ({"vantage_point": local.pk}, "question"),
    ):
        answer = api.post(url, body, format="json")
        assert answer.status_code == 400, body
        assert field in answer.json(), answer.json()
    no_file = EndpointFactory()
    answer = api.post(
        f"/api/v1/endpoints/{no_file.pk}/advice/campaign/", {"question": "knee"}, format="json"
    )
    assert answer.status_code == 400
    assert "endpoint" in answer.json()
    assert not Campaign.objects.exists()


def test_a_viewer_may_read_advice_but_not_create_its_campaign() -> None:
    test_file = TestFileFactory(size=MIB)
    answer = api_for(user("vera", "viewer")).post(
        f"/api/v1/endpoints/{test_file.endpoint.pk}/advice/campaign/",
        {"question": "knee"},
        format="json",
    )
    assert answer.status_code == 403
    assert not Campaign.objects.exists()


def write_runs(test_file: TestFile, local: VantagePoint, counts: tuple[int, ...] = (1, 2)) -> None:
    """Writes at two client counts: the knee of writes is asked, and too thin."""
    for clients in counts:
        RunFactory(
            test_file=test_file,
            vantage_point=local,
            status=Run.Status.SUCCEEDED,
            operation="write",
            clients=clients,
            wall_s=1.0,
            throughput_mbps=10.0 * clients,
            result={"bytes_written": clients * 16 * MIB},
        )


def test_the_knee_of_writes_is_answered_and_its_sweep_created_by_operation() -> None:
    endpoint = EndpointFactory(scratch_path="/scratch/fedprobe")
    test_file = TestFileFactory(endpoint=endpoint, size=MIB)
    local = VantagePointFactory()
    write_runs(test_file, local)
    api = api_for(user("olga", "operator"))
    statements = api.get(f"/api/v1/endpoints/{endpoint.pk}/advice/").json()["statements"]
    knees = [s for s in statements if s["question"] == "knee"]
    assert [s["scope"]["operation"] for s in knees] == ["read", "write"]
    assert knees[1]["verdict"] == "too-thin"
    assert knees[1]["suggested_campaign"]["operation"] == "write"
    url = f"/api/v1/endpoints/{endpoint.pk}/advice/campaign/"
    answer = api.post(
        url, {"question": "knee", "vantage_point": local.pk, "operation": "write"}, format="json"
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["operations"] == ["write"]
    # An operation no knee is asked of, or a question of reads only: named, nothing made.
    for asked in ({"question": "knee", "operation": "tpc-push"}, {"question": "cache"}):
        refused = api.post(url, {"vantage_point": local.pk, "operation": "write"} | asked)
        assert refused.status_code == 400
        assert set(refused.json()) <= {"operation", "question"}
    assert Campaign.objects.filter(name__startswith="Advice:").count() == 1
