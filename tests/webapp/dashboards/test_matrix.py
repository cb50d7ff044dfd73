"""The matrix against PostgreSQL with known runs: latest values, ratings, last good runs,
failed-last cells, the default parameter set, bounded queries, the API and the page."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.webapp.dashboards.status_runs import P, Q, RunMaker, night
from tests.webapp.factories import SiteFactory, VantagePointFactory
from tests.webapp.sqlite import only_on_postgresql
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Run
from webapp.dashboards.selectors import matrix
from webapp.dashboards.selectors.matrix import matrix_data
from webapp.dashboards.selectors.parameter_sets import ParameterSet
from webapp.dashboards.selectors.thresholds import Thresholds

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def history() -> dict[str, Any]:
    """Two vantage points x three endpoints of two sites, parameter sets P (most runs) and Q."""
    make = RunMaker()
    alpha, beta = SiteFactory(name="alpha"), SiteFactory(name=HOSTILE)
    a_root = make.endpoint("a-root", site=alpha)
    a_http = make.endpoint("a-http", site=alpha, protocol="https")
    b_root = make.endpoint("b-root", site=beta)
    cern, fnal = VantagePointFactory(name="cern"), VantagePointFactory(name="fnal")
    runs = {
        "old": make.add(a_root, cern, S.SUCCEEDED, night(3), throughput_mbps=100, wall_s=9.0),
        "mid": make.add(a_root, cern, S.SUCCEEDED, night(2), throughput_mbps=120, wall_s=8.0),
        "new": make.add(a_root, cern, S.SUCCEEDED, night(1), throughput_mbps=150, wall_s=2.0),
        "fnal_ok": make.add(a_root, fnal, S.SUCCEEDED, night(2), throughput_mbps=80, wall_s=5.0),
        "fnal_timeout": make.add(
            a_root,
            fnal,
            S.TIMEOUT,
            night(1),
            errors=[{"class": "timeout", "message": "no answer in 60 s", "client": 0}],
        ),
        "partial": make.add(a_http, cern, S.PARTIAL, night(1), throughput_mbps=40, wall_s=20.0),
        "b_failed": make.add(
            b_root, cern, S.FAILED, night(1), errors=[{"class": "refused", "message": "x"}]
        ),
        "b_cancelled": make.add(b_root, cern, S.CANCELLED, night(0)),
        "b_queued": make.add(b_root, fnal, S.QUEUED, night(0)),
        "q": make.add(a_root, cern, S.SUCCEEDED, night(0), params=Q, throughput_mbps=999),
    }
    return {"runs": runs, "a_root": a_root, "a_http": a_http, "b_root": b_root, "beta": beta}


def cells_by_pair(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["vantage_point"], c["endpoint_name"]): c for c in data["cells"]}


def test_latest_values_per_vantage_point_and_endpoint(history: dict[str, Any]) -> None:
    data = matrix_data(query={})
    assert data["parameter_set"]["label"] == ParameterSet(**P).label  # the most common
    cells = cells_by_pair(data)
    assert set(cells) == {
        ("cern", "a-root"),
        ("fnal", "a-root"),
        ("cern", "a-http"),
        ("cern", "b-root"),
    }
    runs = history["runs"]
    assert cells["cern", "a-root"]["value"] == 150
    assert cells["cern", "a-root"]["value_run"] == runs["new"].pk
    assert cells["cern", "a-root"]["failed"] is False
    assert cells["cern", "a-http"]["value"] == 40
    assert cells["cern", "a-http"]["value_status"] == S.PARTIAL


def test_failed_last_cells_keep_the_last_measured_value_and_say_why(
    history: dict[str, Any],
) -> None:
    cells = cells_by_pair(matrix_data(query={}))
    timed_out = cells["fnal", "a-root"]
    assert timed_out["failed"] is True
    assert timed_out["last_status"] == S.TIMEOUT
    assert timed_out["error_class"] == "timeout"
    assert timed_out["error_message"] == "no answer in 60 s"
    assert timed_out["value"] == 80  # from the last run that measured
    # The cancelled run after it is the operator's act: b-root's latest ended run failed.
    refused = cells["cern", "b-root"]
    assert (refused["failed"], refused["error_class"], refused["value"]) == (True, "refused", None)


def test_time_since_the_last_good_run(history: dict[str, Any]) -> None:
    cells = cells_by_pair(matrix_data(query={}))
    runs = history["runs"]
    assert cells["fnal", "a-root"]["last_good_at"] == runs["fnal_ok"].created_at
    since = (timezone.now() - runs["fnal_ok"].created_at).total_seconds()
    assert abs(cells["fnal", "a-root"]["since_good_s"] - since) < 60
    assert cells["cern", "a-http"]["last_good_at"] is None  # partial is not good
    assert cells["cern", "b-root"]["since_good_s"] is None


def test_thresholds_rate_higher_and_lower_is_better(history: dict[str, Any]) -> None:
    cells = cells_by_pair(matrix_data(query={"good": 100.0, "bad": 50.0}))
    ratings = {pair: cell["rating"] for pair, cell in cells.items()}
    assert ratings == {
        ("cern", "a-root"): "good",  # 150 MB/s
        ("fnal", "a-root"): "warn",  # 80
        ("cern", "a-http"): "bad",  # 40
        ("cern", "b-root"): None,  # nothing measured
    }
    cells = cells_by_pair(matrix_data(query={"metric": "wall_s", "good": 5.0, "bad": 10.0}))
    assert cells["cern", "a-root"]["rating"] == "good"  # 2 s
    assert cells["fnal", "a-root"]["rating"] == "good"  # 5 s: on the boundary
    assert cells["cern", "a-http"]["rating"] == "bad"  # 20 s
    # Without boundaries in the query, the defaults rate (throughput: good >= 100, bad <= 10).
    assert cells_by_pair(matrix_data(query={}))["cern", "a-root"]["rating"] == "good"


def test_boundaries_are_inclusive_on_both_sides() -> None:
    higher = Thresholds(good=100, bad=50, higher_is_better=True)
    assert [higher.rate(v) for v in (100, 99.9, 50.1, 50)] == ["good", "warn", "warn", "bad"]
    lower = Thresholds(good=1, bad=2, higher_is_better=False)
    assert [lower.rate(v) for v in (1, 1.5, 2, 3)] == ["good", "warn", "bad", "bad"]


def test_a_chosen_parameter_set_shows_only_its_runs(history: dict[str, Any]) -> None:
    data = matrix_data(query=dict(Q))
    assert [(c["vantage_point"], c["endpoint_name"], c["value"]) for c in data["cells"]] == [
        ("cern", "a-root", 999)
    ]
    # A partial choice is completed with the most common set that agrees with it.
    assert matrix_data(query={"method": "copy"})["parameter_set"]["clients"] == 1


def test_filters_by_site_protocol_and_vantage_point(history: dict[str, Any]) -> None:
    by_site = matrix_data(query={"site": history["beta"]})
    assert {c["endpoint_name"] for c in by_site["cells"]} == {"b-root"}
    https = matrix_data(query={"protocol": "https"})
    assert {c["endpoint_name"] for c in https["cells"]} == {"a-http"}
    fnal = Run.objects.get(pk=history["runs"]["fnal_ok"].pk).vantage_point
    assert {c["vantage_point"] for c in matrix_data(query={"vantage_point": fnal})["cells"]} == {
        "fnal"
    }


def test_site_by_protocol_pools_the_endpoint_cells(history: dict[str, Any]) -> None:
    data = matrix_data(query={"view": "site-protocol", "good": 100.0, "bad": 50.0})
    cells = {(c["site_name"], c["protocol"]): c for c in data["cells"]}
    alpha_root = cells["alpha", "root"]
    assert alpha_root["value"] == (150 + 80) / 2  # median of cern's and fnal's latest
    assert (alpha_root["pairs"], alpha_root["failed_pairs"], alpha_root["failed"]) == (2, 1, True)
    assert alpha_root["rating"] == "good"
    assert cells["alpha", "https"]["rating"] == "bad"
    assert data["columns"] == [{"protocol": "https"}, {"protocol": "root"}]
    assert [r["site_name"] for r in data["rows"]] == [HOSTILE, "alpha"]


def test_cells_link_to_compare_for_their_pair(history: dict[str, Any]) -> None:
    cell = cells_by_pair(matrix_data(query={"metric": "open_s"}))["fnal", "a-root"]
    url = cell["compare_url"]
    assert url.startswith("/compare/?")
    for part in (
        f"endpoint={history['a_root'].pk}",
        "vantage_point=fnal",
        "metric=open_s",
        "method=direct",
        "pattern=random",
        "read_size=65536",
        "fraction=0.1",
        "clients=2",
    ):
        assert part in url.split("?")[1].split("&")


def test_suggested_boundaries_split_the_values_in_thirds(history: dict[str, Any]) -> None:
    suggested = matrix_data(query={})["suggested"]
    assert suggested["bad"] < suggested["good"]  # throughput: higher is better
    suggested = matrix_data(query={"metric": "wall_s"})["suggested"]
    assert suggested["good"] < suggested["bad"]


def test_nothing_measured_gives_an_empty_matrix() -> None:
    data = matrix_data(query={})
    assert (data["parameter_set"], data["cells"], data["rows"], data["columns"]) == (
        None,
        [],
        [],
        [],
    )


def test_queries_do_not_grow_with_the_grid(
    history: dict[str, Any], django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(3):  # and the metric's saved thresholds
        small = matrix_data(query={})
    make = RunMaker()
    for i in range(6):
        endpoint = make.endpoint(f"more-{i}")
        for vp in ("cern", "fnal", "ral"):
            make.add(
                endpoint, VantagePointFactory(name=vp), S.SUCCEEDED, night(1), throughput_mbps=i
            )
    with django_assert_num_queries(2):  # the query's boundaries: no thresholds read
        large = matrix_data(query={"view": "site-protocol", "good": 1.0, "bad": 0.5})
    with django_assert_num_queries(3):
        large = matrix_data(query={})
    assert len(large["cells"]) == len(small["cells"]) + 18


# The API and the page


def login(client: Client, role: str | None) -> None:
    user = User.objects.create_user(f"user-{role}")
    if role:
        user_set_role(user=user, role=role)
    client.force_login(user)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("metric=bogus", "metric"),
        ("good=10", "bad"),
        ("bad=10", "good"),
        ("good=10&bad=20", "bad"),  # throughput: bad above good
        ("metric=wall_s&good=20&bad=10", "bad"),  # time: bad below good
        ("good=nan&bad=1", "good"),
        ("fraction=0", "fraction"),
        ("fraction=2", "fraction"),
        ("read_size=4k", "read_size"),
        ("clients=0", "clients"),
        ("method=teleport", "method"),
        ("view=cube", "view"),
        ("site=999999", "site"),
        ("vantage_point=nowhere", "vantage_point"),
    ],
)
def test_api_bad_parameters_are_a_400_naming_the_field(
    client: Client, query: str, field: str
) -> None:
    login(client, "viewer")
    response = client.get(f"/api/v1/matrix/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_api_answers_viewers_with_the_selectors_data(
    client: Client, history: dict[str, Any]
) -> None:
    login(client, "viewer")
    response = client.get("/api/v1/matrix/?good=100&bad=50")
    assert response.status_code == 200
    data = response.json()
    assert {
        (c["vantage_point"], c["endpoint_name"], c["value"], c["rating"]) for c in data["cells"]
    } >= {
        ("cern", "a-root", 150, "good"),
        ("fnal", "a-root", 80, "warn"),
    }
    assert data["unit"] == "MB/s" and data["higher_is_better"] is True


@pytest.mark.parametrize("role", [None, "anonymous"])
def test_api_refuses_users_without_a_role(client: Client, role: str | None) -> None:
    if role is None:
        login(client, None)
    assert client.get("/api/v1/matrix/").status_code in (401, 403)


def test_page_draws_the_cells_with_names_as_text(client: Client, history: dict[str, Any]) -> None:
    login(client, "viewer")
    response = client.get("/matrix/?good=100&bad=50")
    assert response.status_code == 200
    html = response.content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img src=x" not in html  # json_script escapes it too
    assert 'class="cell rating-good"' in html
    assert 'class="cell rating-warn failed"' in html
    assert "✗ timeout<" in html


def test_page_with_bad_controls_names_the_field(client: Client) -> None:
    login(client, "viewer")
    response = client.get("/matrix/?good=1")
    assert response.status_code == 400
    assert "bad: give both good and bad boundaries" in response.content.decode()


def test_page_without_runs_says_what_to_do(client: Client) -> None:
    login(client, "viewer")
    html = client.get("/matrix/").content.decode()
    assert "Nothing has been measured yet" in html


@only_on_postgresql
@pytest.mark.parametrize("metric", ["throughput_mbps", "latency_p99_us"])
def test_the_probes_answer_what_the_portable_query_answers(metric: str) -> None:
    """PostgreSQL's LATERAL probes (one per ended status, and a further one only past a
    tester fault or a missing figure) against the correlated subqueries SQLite runs, on a
    random history with every status, tester faults of each kind and missing figures."""
    rng = random.Random(16)
    make = RunMaker()
    site = SiteFactory(name="s")
    endpoints = [make.endpoint(f"e{n}", site=site) for n in range(4)]
    points = [VantagePointFactory(name=name) for name in ("cern", "fnal", "ral")]
    tester_errors = [
        [{"class": "lost", "message": "the worker stopped reporting"}],
        [{"class": "auth", "phase": "credential", "message": "token expired"}],
    ]
    for endpoint in endpoints:
        for point in points:
            for n in range(rng.randint(0, 9)):
                status = rng.choice([S.SUCCEEDED, S.PARTIAL, S.FAILED, S.TIMEOUT, S.CANCELLED])
                errors = rng.choice([[], [{"class": "refused", "message": "no"}], *tester_errors])
                figures = {metric: rng.choice([None, rng.uniform(1, 100)])}
                make.add(
                    endpoint,
                    point,
                    status,
                    night(n, hour=rng.randint(0, 23)),
                    errors=errors,
                    **figures,
                )
    parameter_set = ParameterSet(**P)
    sql = {
        "lateral": matrix._cells_sql_lateral(metric, "1 = 1"),
        "portable": matrix._cells_sql_portable(metric, "1 = 1"),
    }
    answers = {}
    for name, statement in sql.items():
        with connection.cursor() as cursor:
            cursor.execute(statement, dict(parameter_set.query()))
            answers[name] = cursor.fetchall()
    assert len(answers["lateral"]) >= 10  # pairs with an ended run
    assert answers["lateral"] == answers["portable"]
