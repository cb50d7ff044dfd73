"""GET /api/v1/regressions/ (filters, severity first, each with its detector, blame and
versions), one regression with its series, and ack/silence/unsilence/resolve: 409 with the
state for a change the state does not allow, 400 naming the field, 403 for viewers."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import (
    EndpointFactory,
    RegressionFactory,
    SeriesNightFactory,
    SiteFactory,
    VantagePointFactory,
    api_for,
    user,
)
from webapp.watch.models import Regression, RegressionEvent

pytestmark = pytest.mark.django_db
State = Regression.State
URL = "/api/v1/regressions/"


def _ids(answer: Any) -> list[int]:
    return [row["id"] for row in answer.json()["results"]]


def test_the_list_is_severity_first_then_newest() -> None:
    # Older than the factory's opened_at (a fixed day), whatever today's date.
    old_critical = RegressionFactory(
        severity="critical", opened_at=datetime(2026, 11, 10, 6, 0, tzinfo=UTC)
    )
    new_warning = RegressionFactory(severity="warning")
    info = RegressionFactory(severity="info")
    newer_critical = RegressionFactory(severity="critical")
    answer = api_for(user("v", "viewer")).get(URL)
    assert answer.status_code == 200
    assert _ids(answer) == [newer_critical.pk, old_critical.pk, new_warning.pk, info.pk]
    assert answer.json()["count"] == 4


def test_each_regression_carries_its_detector_blame_and_versions() -> None:
    regression = RegressionFactory(
        versions=[
            {"kind": "server", "version": "5.6.2", "first_seen": "2026-11-20", "previous": "5.6.1"}
        ]
    )
    row = api_for(user("v", "viewer")).get(URL).json()["results"][0]
    assert row["detector"]["name"] == "e-divisive"
    assert row["detector"]["baseline_window"] == ["2026-10-25", "2026-11-19"]
    assert row["detector"]["target_window"] == ["2026-11-20", "2026-11-24"]
    assert row["blame"] == {"target": "site", "rule": "one series"}
    assert row["versions"][0]["version"] == "5.6.2"
    assert row["endpoint"]["id"] == regression.endpoint_id
    assert row["site"] == {"id": regression.endpoint.site_id, "name": regression.endpoint.site.name}
    assert row["parameter_set"] == {
        "operation": "read", "method": "direct", "pattern": "random", "read_size": 65536,
        "fraction": 0.1, "clients": 2, "address_family": "any",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=acknowledged", ["ack"]),
        ("state=open&state=acknowledged", ["open", "ack"]),
        ("verdict=suspicious", ["suspicious"]),
        ("metric=availability", ["suspicious"]),
        ("blame=vantage-point", ["vp"]),
        ("vantage_point=far", ["vp"]),
    ],
)
def test_the_list_filters(query: str, expected: list[str]) -> None:
    far = VantagePointFactory(name="far")
    made = {
        "open": RegressionFactory(opened_at=timezone.now() - timedelta(days=3)),
        "ack": RegressionFactory(state=State.ACKNOWLEDGED, opened_at=timezone.now()),
        "suspicious": RegressionFactory(
            state=State.PENDING, verdict="suspicious", metric="availability"
        ),
        "vp": RegressionFactory(
            state=State.PENDING,
            endpoint=None,
            vantage_point=far,
            method="",
            blame={"target": "vantage-point", "rule": ">= 3 sites"},
        ),
    }
    answer = api_for(user("v", "viewer")).get(f"{URL}?{query}")
    assert answer.status_code == 200
    names = {regression.pk: name for name, regression in made.items()}
    assert sorted(names[i] for i in _ids(answer)) == sorted(expected)


def test_the_site_filter_takes_the_sites_own_and_its_endpoints_regressions() -> None:
    site = SiteFactory()
    of_endpoint = RegressionFactory(endpoint=EndpointFactory(site=site))
    of_site = RegressionFactory(endpoint=None, site=site, method="", blame={"target": "site"})
    RegressionFactory()
    answer = api_for(user("v", "viewer")).get(f"{URL}?site={site.pk}")
    assert sorted(_ids(answer)) == sorted([of_endpoint.pk, of_site.pk])


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("state=broken", "state"),
        ("verdict=bad", "verdict"),
        ("site=999999", "site"),
        ("vantage_point=nowhere", "vantage_point"),
        ("metric=speed", "metric"),
        ("blame=weather", "blame"),
    ],
)
def test_a_bad_filter_answers_400_naming_it(query: str, field: str) -> None:
    answer = api_for(user("v", "viewer")).get(f"{URL}?{query}")
    assert answer.status_code == 400
    assert list(answer.json()) == [field]


def test_the_detail_has_the_series_band_other_vantage_points_and_events() -> None:
    regression = RegressionFactory()
    series = {
        "endpoint": regression.endpoint, "method": "direct", "pattern": "random",
        "read_size": 65536, "fraction": 0.1, "clients": 2,
    }  # fmt: skip
    for day in range(1, 25):
        median = 100.0 + (day % 3) if day < 20 else 60.0
        SeriesNightFactory(
            vantage_point=regression.vantage_point, night=date(2026, 11, day),
            metrics={"throughput_mbps": {"median": median, "q1": median - 1, "q3": median + 1,
                                         "n": 4, "mad": 1}},
            **series,
        )  # fmt: skip
    SeriesNightFactory(
        vantage_point=VantagePointFactory(name="other"), night=date(2026, 11, 21), **series
    )
    operator_api = api_for(user("op"))
    operator_api.post(f"{URL}{regression.pk}/ack/", {"note": "on it"}, format="json")
    detail = api_for(user("v", "viewer")).get(f"{URL}{regression.pk}/").json()
    nights = detail["series"]["nights"]
    assert [n["night"] for n in nights][:2] == ["2026-11-01", "2026-11-02"]
    assert nights[-1] == {
        "night": "2026-11-24", "value": 60.0, "q1": 59.0, "q3": 61.0, "n": 4, "runs": 4,
        "server_versions": ["v5.6.1"], "client_versions": ["xrootd 5.6.1 (Python bindings)"],
    }  # fmt: skip
    band = detail["series"]["band"]
    assert band["median"] == 101.0  # the baseline window's nights (2026-11-01 .. 19)
    assert band["low"] < 100.0 and band["high"] > 102.0  # the baseline inside its band
    assert detail["series"]["windows"] == {
        "baseline": ["2026-10-25", "2026-11-19"], "target": ["2026-11-20", "2026-11-24"]
    }  # fmt: skip
    assert [o["vantage_point"] for o in detail["series"]["others"]] == ["other"]
    assert [(e["state"], e["actor"], e["note"]) for e in detail["events"]] == [
        ("acknowledged", "op", "on it")
    ]


def test_acknowledging_over_the_api_records_the_operator_and_note() -> None:
    regression = RegressionFactory()
    answer = api_for(user("op")).post(
        f"{URL}{regression.pk}/ack/", {"note": "GGUS 1"}, format="json"
    )
    assert answer.status_code == 200
    body = answer.json()
    assert (body["state"], body["acknowledged_by"], body["ack_note"]) == (
        "acknowledged", "op", "GGUS 1"
    )  # fmt: skip


def test_acknowledging_a_pending_regression_answers_409_with_its_state() -> None:
    regression = RegressionFactory(state=State.PENDING)
    answer = api_for(user("op")).post(f"{URL}{regression.pk}/ack/", {"note": "x"}, format="json")
    assert answer.status_code == 409
    assert answer.json()["state"] == "pending"
    assert "pending" in answer.json()["detail"]
    assert not RegressionEvent.objects.exists()


def test_acknowledging_without_a_note_answers_400_naming_note() -> None:
    regression = RegressionFactory()
    answer = api_for(user("op")).post(f"{URL}{regression.pk}/ack/", {}, format="json")
    assert answer.status_code == 400
    assert list(answer.json()) == ["note"]
    assert Regression.objects.get(pk=regression.pk).state == State.OPEN


@pytest.mark.parametrize("action", ["ack", "silence", "unsilence", "resolve"])
def test_a_viewer_may_not_act_on_a_regression(action: str) -> None:
    regression = RegressionFactory()
    until = (timezone.now() + timedelta(days=1)).isoformat()
    body = {"note": "x", "until": until}
    answer = api_for(user("v", "viewer")).post(
        f"{URL}{regression.pk}/{action}/", body, format="json"
    )
    assert answer.status_code == 403
    stored = Regression.objects.get(pk=regression.pk)
    assert (stored.state, stored.silenced_until) == (State.OPEN, None)


def test_silencing_and_unsilencing_over_the_api() -> None:
    regression = RegressionFactory()
    api = api_for(user("op"))
    until = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    answer = api.post(
        f"{URL}{regression.pk}/silence/",
        {"until": until.isoformat(), "note": "known"},
        format="json",
    )
    assert answer.status_code == 200
    assert datetime.fromisoformat(answer.json()["silenced_until"]) == until
    assert answer.json()["silenced_by"] == "op"
    assert api.post(f"{URL}{regression.pk}/unsilence/").json()["silenced_until"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"until": "2020-01-01T00:00:00Z", "note": "x"}, "until"),
        ({"until": "in a while", "note": "x"}, "until"),
        ({"note": "x"}, "until"),
        ({"until": "2099-01-01T00:00:00Z", "note": "x"}, "until"),
        ({"until": "TOMORROW", "note": ""}, "note"),
    ],
)
def test_a_bad_silence_answers_400_naming_the_field(body: dict[str, str], field: str) -> None:
    regression = RegressionFactory()
    if body.get("until") == "TOMORROW":
        body = {**body, "until": (timezone.now() + timedelta(days=1)).isoformat()}
    answer = api_for(user("op")).post(f"{URL}{regression.pk}/silence/", body, format="json")
    assert answer.status_code == 400
    assert field in answer.json()
    assert Regression.objects.get(pk=regression.pk).silenced_until is None


def test_resolving_by_hand_over_the_api_and_again_is_409() -> None:
    regression = RegressionFactory()
    api = api_for(user("op"))
    assert (
        api.post(f"{URL}{regression.pk}/resolve/", {"note": "fixed"}, format="json").json()["state"]
        == "resolved"
    )
    again = api.post(f"{URL}{regression.pk}/resolve/", {}, format="json")
    assert (again.status_code, again.json()["state"]) == (409, "resolved")


def test_the_regressions_operations_are_in_the_openapi_schema() -> None:
    schema = api_for(user("v", "viewer")).get("/api/schema/?format=json").json()
    paths = schema["paths"]
    for path in ("", "{id}/", "{id}/ack/", "{id}/silence/", "{id}/unsilence/", "{id}/resolve/"):
        assert f"/api/v1/regressions/{path}" in paths
    components = schema["components"]["schemas"]
    assert "points" in components["Series"]["properties"]  # /api/v1/series/'s, not ours
    assert "band" in components["RegressionSeries"]["properties"]
    names = {p["name"] for p in paths["/api/v1/regressions/"]["get"]["parameters"]}
    assert names >= {"state", "verdict", "site", "endpoint", "vantage_point", "metric", "blame"}


def test_the_list_reads_a_bounded_number_of_queries(django_assert_max_num_queries: Any) -> None:
    for n in range(60):
        RegressionFactory(acknowledged_by=user(f"u{n}"), silenced_by=user(f"s{n}"))
    api = api_for(user("v", "viewer"))
    with django_assert_max_num_queries(5):  # the role, the count, the page's keys, its rows
        answer = api.get(URL)
    assert len(answer.json()["results"]) == 50
