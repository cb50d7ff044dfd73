"""The matrix's thresholds: shipped defaults colour a first visit, an operator's saved ones
colour everyone's matrix, the query's boundaries override both for one view; bad boundaries
are refused naming the field and change nothing; viewers read them and may not save them.
On PostgreSQL and, in bin/test's SQLite stage (marker `sqlite`), on the embedded SQLite database."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client

from tests.webapp.dashboards.status_runs import RunMaker, night
from tests.webapp.factories import VantagePointFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.metrics import METRICS, RUN_METRICS
from webapp.campaigns.models import Run
from webapp.dashboards.models import MatrixThreshold
from webapp.dashboards.selectors.matrix import matrix_data
from webapp.dashboards.selectors.thresholds import thresholds_all, thresholds_for
from webapp.dashboards.services import matrix_threshold_reset, matrix_threshold_save

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status


@pytest.fixture
def measured() -> None:
    """One endpoint at 150 MB/s and one at 40 MB/s, from one vantage point."""
    make = RunMaker()
    cern = VantagePointFactory(name="cern")
    make.add(make.endpoint("fast"), cern, S.SUCCEEDED, night(1), throughput_mbps=150, wall_s=2)
    make.add(make.endpoint("slow"), cern, S.SUCCEEDED, night(1), throughput_mbps=40, wall_s=20)


def user(role: str | None, name: str = "") -> User:
    made = User.objects.create_user(name or f"user-{role}")
    if role:
        user_set_role(user=made, role=role)
    return made


def ratings(data: dict[str, Any]) -> dict[str, str]:
    return {c["endpoint_name"]: c["rating"] for c in data["cells"]}


def saved() -> list[tuple[str, float, float]]:
    return list(MatrixThreshold.objects.values_list("metric", "good", "bad"))


# Defaults, saves and the matrix


def test_every_metric_has_defaults_the_right_way_round() -> None:
    for metric in RUN_METRICS:
        good, bad = metric.thresholds
        assert good >= 0 and bad >= 0
        assert (bad < good) if metric.higher_is_better else (good < bad), metric.name


def test_a_first_visit_is_coloured_by_the_default_thresholds(measured: None) -> None:
    data = matrix_data(query={})
    assert data["thresholds"] == {
        "good": 100.0,
        "bad": 10.0,
        "source": "default",
        "saved_by": None,
        "saved_at": None,
    }
    assert ratings(data) == {"fast": "good", "slow": "warn"}


def test_saved_thresholds_colour_everyones_matrix(measured: None) -> None:
    operator = user("operator", "olga")
    row, created = matrix_threshold_save(metric="throughput_mbps", good=200, bad=50, user=operator)
    assert created
    data = matrix_data(query={})
    assert ratings(data) == {"fast": "warn", "slow": "bad"}
    assert data["thresholds"]["source"] == "saved"
    assert data["thresholds"]["saved_by"] == "olga"
    assert data["thresholds"]["saved_at"] == row.saved_at
    # Another metric keeps its defaults (wall time: good <= 10 s, bad >= 60 s).
    wall = matrix_data(query={"metric": "wall_s"})
    assert (wall["thresholds"]["source"], ratings(wall)) == (
        "default",
        {"fast": "good", "slow": "warn"},
    )


def test_boundaries_in_the_query_override_the_saved_ones_for_that_view(measured: None) -> None:
    matrix_threshold_save(metric="throughput_mbps", good=200, bad=50, user=user("operator"))
    data = matrix_data(query={"good": 30.0, "bad": 20.0})
    assert ratings(data) == {"fast": "good", "slow": "good"}
    assert data["thresholds"]["source"] == "address"
    assert thresholds_for("throughput_mbps").good == 200  # nothing saved by a view


def test_a_second_save_replaces_the_first_and_a_reset_brings_back_the_defaults() -> None:
    matrix_threshold_save(metric="open_s", good=1, bad=3, user=user("operator"))
    _, created = matrix_threshold_save(metric="open_s", good=0.2, bad=0.8, user=user("admin"))
    assert not created
    assert saved() == [("open_s", 0.2, 0.8)]
    assert thresholds_for("open_s").saved_by == "user-admin"
    assert matrix_threshold_reset(metric="open_s") is True
    assert saved() == []
    assert thresholds_for("open_s").source == "default"
    assert matrix_threshold_reset(metric="open_s") is False


@pytest.mark.parametrize(
    ("metric", "good", "bad", "field"),
    [
        ("throughput_mbps", 10.0, 100.0, "bad"),  # higher is better: bad above good
        ("wall_s", 10.0, 1.0, "bad"),  # lower is better: bad below good
        ("open_s", -1.0, 2.0, "good"),
        ("throughput_mbps", 100.0, -5.0, "bad"),
        ("throughput_mbps", float("nan"), 1.0, "good"),
        ("throughput_mbps", float("inf"), 1.0, "good"),
        ("failure_rate", 0.1, 0.5, "metric"),
    ],
)
def test_bad_boundaries_are_refused_naming_the_field_and_change_nothing(
    metric: str, good: float, bad: float, field: str
) -> None:
    matrix_threshold_save(metric="throughput_mbps", good=100, bad=10, user=None)
    matrix_threshold_save(metric="wall_s", good=5, bad=50, user=None)
    matrix_threshold_save(metric="open_s", good=1, bad=2, user=None)
    before = saved()
    with pytest.raises(ValidationError) as refused:
        matrix_threshold_save(metric=metric, good=good, bad=bad, user=user("operator"))
    assert list(refused.value.message_dict) == [field]
    assert saved() == before


def test_the_database_refuses_negative_boundaries_too() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        MatrixThreshold.objects.create(metric="cpu_s", good=-1, bad=2, saved_at=night(0))


def test_thresholds_of_a_deleted_user_stay_saved() -> None:
    operator = user("operator")
    matrix_threshold_save(metric="cpu_s", good=2, bad=20, user=operator)
    operator.delete()
    kept = thresholds_for("cpu_s")
    assert (kept.source, kept.saved_by, kept.good) == ("saved", None, 2)


def test_every_metrics_thresholds_in_one_query(django_assert_num_queries: Any) -> None:
    matrix_threshold_save(metric="ttfb_s", good=0.1, bad=1, user=user("operator"))
    matrix_threshold_save(metric="cpu_s", good=2, bad=20, user=user("admin"))
    with django_assert_num_queries(1):
        every = thresholds_all()
    assert list(every) == list(METRICS)
    assert {m for m, t in every.items() if t.source == "saved"} == {"ttfb_s", "cpu_s"}
    assert every["cpu_s"].saved_by == "user-admin"


# The API


def logged_in(client: Client, role: str | None) -> Client:
    client.force_login(user(role))
    return client


def put(client: Client, metric: str, body: Any) -> Any:
    return client.put(f"/api/v1/matrix/thresholds/{metric}/", body, content_type="application/json")


def test_api_lists_every_metrics_thresholds_for_viewers(client: Client) -> None:
    matrix_threshold_save(metric="wall_s", good=3, bad=30, user=user("operator", "olga"))
    answer = logged_in(client, "viewer").get("/api/v1/matrix/thresholds/")
    assert answer.status_code == 200
    rows = {row["metric"]: row for row in answer.json()}
    assert list(rows) == list(METRICS)
    assert rows["throughput_mbps"] | {"saved_at": None} == {
        "metric": "throughput_mbps",
        "unit": "MB/s",
        "higher_is_better": True,
        "good": 100.0,
        "bad": 10.0,
        "source": "default",
        "saved_by": None,
        "saved_at": None,
    }
    assert (rows["wall_s"]["source"], rows["wall_s"]["saved_by"]) == ("saved", "olga")
    assert rows["wall_s"]["higher_is_better"] is False
    one = client.get("/api/v1/matrix/thresholds/wall_s/").json()
    assert (one["good"], one["bad"]) == (3.0, 30.0)


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_api_saves_thresholds_that_the_matrix_then_uses(
    client: Client, role: str, measured: None
) -> None:
    logged_in(client, role)
    first = put(client, "throughput_mbps", {"good": 200, "bad": 50})
    assert first.status_code == 201
    assert first.json()["source"] == "saved" and first.json()["saved_by"] == f"user-{role}"
    again = put(client, "throughput_mbps", {"good": 120, "bad": 50})
    assert again.status_code == 200 and again.json()["good"] == 120
    posted = client.post(
        "/api/v1/matrix/thresholds/",
        {"metric": "wall_s", "good": 1, "bad": 5},
        content_type="application/json",
    )
    assert posted.status_code == 201 and posted.json()["metric"] == "wall_s"
    viewer = logged_in(Client(), "viewer")
    matrix = viewer.get("/api/v1/matrix/").json()
    assert matrix["thresholds"]["source"] == "saved"
    assert {c["endpoint_name"]: c["rating"] for c in matrix["cells"]} == {
        "fast": "good",
        "slow": "bad",
    }
    gone = client.delete("/api/v1/matrix/thresholds/throughput_mbps/")
    assert gone.status_code == 200 and gone.json()["source"] == "default"
    assert viewer.get("/api/v1/matrix/").json()["thresholds"]["good"] == 100


def test_api_refuses_viewers_saying_why_and_changes_nothing(client: Client) -> None:
    matrix_threshold_save(metric="wall_s", good=3, bad=30, user=None)
    logged_in(client, "viewer")
    answers = [
        put(client, "wall_s", {"good": 1, "bad": 2}),
        client.post(
            "/api/v1/matrix/thresholds/",
            {"metric": "wall_s", "good": 1, "bad": 2},
            content_type="application/json",
        ),
        client.delete("/api/v1/matrix/thresholds/wall_s/"),
    ]
    for answer in answers:
        assert answer.status_code == 403
        assert answer.json()["detail"] == (
            "only operators and admins save the matrix's thresholds: you are a viewer"
        )
    assert saved() == [("wall_s", 3.0, 30.0)]


def test_api_refuses_users_without_a_role(client: Client) -> None:
    assert client.get("/api/v1/matrix/thresholds/").status_code in (401, 403)
    logged_in(client, None)
    assert client.get("/api/v1/matrix/thresholds/").status_code == 403


@pytest.mark.parametrize(
    ("metric", "body", "field"),
    [
        ("throughput_mbps", {"good": 10, "bad": 100}, "bad"),
        ("latency_p99_us", {"good": 500, "bad": 100}, "bad"),
        ("throughput_mbps", {"good": -1, "bad": -2}, "good"),
        ("wall_s", {"good": 1, "bad": -2}, "bad"),
        ("wall_s", {"bad": 2}, "good"),
        ("wall_s", {"good": "fast", "bad": 2}, "good"),
    ],
)
def test_api_bad_boundaries_are_a_400_naming_the_field_and_change_nothing(
    client: Client, metric: str, body: dict[str, Any], field: str
) -> None:
    matrix_threshold_save(
        metric=metric,
        good=METRICS[metric].thresholds[0],
        bad=METRICS[metric].thresholds[1],
        user=None,
    )
    before = saved()
    answer = put(logged_in(client, "operator"), metric, body)
    assert answer.status_code == 400
    assert field in answer.json()
    assert saved() == before


def test_api_unknown_metrics_are_named(client: Client) -> None:
    logged_in(client, "operator")
    posted = client.post(
        "/api/v1/matrix/thresholds/",
        {"metric": "failure_rate", "good": 0.1, "bad": 0.5},
        content_type="application/json",
    )
    assert posted.status_code == 400 and "metric" in posted.json()
    answer = put(client, "failure_rate", {"good": 0.1, "bad": 0.5})
    assert answer.status_code == 404
    assert "unknown metric 'failure_rate'" in answer.json()["detail"]
    assert saved() == []


def test_the_schema_documents_the_thresholds(client: Client) -> None:
    logged_in(client, "viewer")
    schema = client.get("/api/schema/", {"format": "json"}).json()
    listing = schema["paths"]["/api/v1/matrix/thresholds/"]
    one = schema["paths"]["/api/v1/matrix/thresholds/{metric}/"]
    assert set(listing) >= {"get", "post"} and set(one) >= {"get", "put", "delete"}
    assert {"400", "403"} <= set(one["put"]["responses"])


# The page


def test_the_page_says_where_its_colours_come_from(client: Client, measured: None) -> None:
    logged_in(client, "viewer")
    html = client.get("/matrix/").content.decode()
    assert "default thresholds (nobody has saved any for throughput_mbps)" in html
    assert 'class="cell rating-good"' in html and 'class="cell rating-warn"' in html
    assert 'id="threshold-form"' not in html  # viewers do not save
    matrix_threshold_save(metric="throughput_mbps", good=200, bad=50, user=user("operator", "olga"))
    html = client.get("/matrix/").content.decode()
    assert "thresholds saved by olga on " in html
    assert 'class="cell rating-bad"' in html
    html = client.get("/matrix/?good=1&bad=0").content.decode()
    assert "the boundaries in this page's address, for this view only" in html


def test_operators_save_and_reset_thresholds_on_the_page(client: Client, measured: None) -> None:
    logged_in(client, "operator")
    assert 'id="threshold-form"' in client.get("/matrix/?metric=wall_s").content.decode()
    answer = client.post(
        "/matrix/?metric=wall_s&view=endpoint&good=9&bad=99",
        {"thresholds-metric": "wall_s", "thresholds-good": "1", "thresholds-bad": "5"},
    )
    assert answer.status_code == 302
    assert answer["Location"] == "/matrix/?metric=wall_s&view=endpoint"
    assert saved() == [("wall_s", 1.0, 5.0)]
    html = client.get(answer["Location"]).content.decode()
    assert "thresholds saved by user-operator" in html
    client.post("/matrix/", {"thresholds-metric": "wall_s", "thresholds-reset": "on"})
    assert saved() == []


def test_the_page_names_a_bad_boundary_and_saves_nothing(client: Client, measured: None) -> None:
    logged_in(client, "operator")
    answer = client.post(
        "/matrix/",
        {"thresholds-metric": "throughput_mbps", "thresholds-good": "5", "thresholds-bad": "50"},
    )
    assert answer.status_code == 400
    assert "bad: throughput_mbps: higher is better, so bad must be at most good" in (
        answer.content.decode()
    )
    assert saved() == []


def test_the_page_refuses_viewers_saying_why(client: Client) -> None:
    logged_in(client, "viewer")
    answer = client.post(
        "/matrix/", {"thresholds-metric": "wall_s", "thresholds-good": "1", "thresholds-bad": "5"}
    )
    assert answer.status_code == 403
    # The 403 page gives the reason (capitalised, HTML-escaped).
    assert "nly operators and admins save the matrix&#x27;s thresholds: you are a viewer" in (
        answer.content.decode()
    )
    assert saved() == []
