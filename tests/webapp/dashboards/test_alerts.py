"""Failing now and slower than the week before, against PostgreSQL with known runs rolled up
by the watch's pass (the alerts read what it stored, never raw runs); the alerts API and
page, and the home page that shows the top of both lists."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.webapp.dashboards.status_runs import P, Q, RunMaker, night, watch_pass
from tests.webapp.factories import SiteFactory, VantagePointFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Run
from webapp.dashboards.selectors.alerts import alerts_data
from webapp.watch.models import Regression

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def failing() -> dict[str, Any]:
    make = RunMaker()
    site = SiteFactory(name=HOSTILE)
    broken, flaky, fine = (make.endpoint(n, site=site) for n in ("broken", "flaky", "fine"))
    cern = VantagePointFactory(name="cern")
    runs = {
        "broken_ok": make.add(broken, cern, S.SUCCEEDED, night(5), throughput_mbps=10),
        "broken_partial": make.add(broken, cern, S.PARTIAL, night(4), throughput_mbps=5),
        "broken_1": make.add(
            broken, cern, S.FAILED, night(3), errors=[{"class": "refused", "message": "m1"}]
        ),
        "broken_2": make.add(
            broken, cern, S.TIMEOUT, night(2), errors=[{"class": "timeout", "message": "m2"}]
        ),
        "broken_3": make.add(
            broken, cern, S.FAILED, night(1), errors=[{"class": "auth", "message": "denied"}]
        ),
        "broken_cancelled": make.add(broken, cern, S.CANCELLED, night(0)),
        # Failed before, succeeded last: not failing. Q failed last: failing, never good.
        "flaky_failed": make.add(flaky, cern, S.FAILED, night(2)),
        "flaky_ok": make.add(flaky, cern, S.SUCCEEDED, night(1), throughput_mbps=9),
        "flaky_q": make.add(flaky, cern, S.FAILED, night(1), params=Q),
        "fine": make.add(fine, cern, S.SUCCEEDED, night(1), throughput_mbps=9),
        # Failing, but its latest run is older than the window.
        "stale": make.add(fine, cern, S.FAILED, night(30), params={**P, "clients": 8}),
    }
    return runs


def night_start(run: Run) -> datetime:
    return datetime.combine(run.created_at.astimezone(UTC).date(), time(), tzinfo=UTC)


def test_failing_now_is_the_groups_whose_latest_night_failed(failing: dict[str, Any]) -> None:
    watch_pass()
    rows = alerts_data(query={})["failing"]
    assert [(r["endpoint_name"], r["clients"]) for r in rows] == [("flaky", 1), ("broken", 2)]
    broken = rows[1]
    assert broken["run"] == failing["broken_3"].pk
    assert (broken["status"], broken["error_class"], broken["error_message"]) == (
        S.FAILED,
        "auth",
        "denied",
    )
    assert broken["last_at"] == failing["broken_3"].created_at
    # Failing since the first failing night after the last one that measured (partial).
    assert broken["failing_since"] == night_start(failing["broken_1"])
    assert broken["failures"] == 3
    assert broken["last_good_at"] == night_start(failing["broken_ok"])
    assert broken["site_name"] == HOSTILE
    flaky_q = rows[0]
    assert (flaky_q["failures"], flaky_q["last_good_at"]) == (1, None)


def test_failing_window_and_filters(failing: dict[str, Any]) -> None:
    watch_pass()
    assert len(alerts_data(query={"days": 60})["failing"]) == 3  # the stale group too
    assert [r["endpoint_name"] for r in alerts_data(query={"method": "direct"})["failing"]] == [
        "broken"
    ]
    assert (
        alerts_data(query={"vantage_point": VantagePointFactory(name="elsewhere")})["failing"] == []
    )


@pytest.fixture
def nightly() -> dict[str, Any]:
    """Seven baseline nights then a latest night, for four groups."""
    make = RunMaker()
    cern = VantagePointFactory(name="cern")
    endpoints = {n: make.endpoint(n) for n in ("dropped", "dipped", "laggy", "young")}
    latest = {"dropped": 60.0, "dipped": 80.0, "laggy": 100.0, "young": 10.0}
    for name, endpoint in endpoints.items():
        nights = range(2, 4) if name == "young" else range(2, 9)
        for days_ago in nights:
            # Night 9 is outside the 7 nights: its slow figure must not count.
            make.add(
                endpoint,
                cern,
                S.SUCCEEDED,
                night(days_ago),
                throughput_mbps=100,
                latency_p50_us=1000,
                open_s=0.01,
            )
        make.add(endpoint, cern, S.SUCCEEDED, night(9), throughput_mbps=1, latency_p50_us=1e6)
        make.add(endpoint, cern, S.FAILED, night(1, hour=1))  # failures do not count
        laggy = 1600.0 if name == "laggy" else 1000.0
        make.add(
            endpoint,
            cern,
            S.SUCCEEDED,
            night(1),
            throughput_mbps=latest[name],
            latency_p50_us=laggy,
            open_s=0.01,
        )
    return endpoints


def test_slower_is_the_latest_night_against_the_median_of_the_week_before(
    nightly: dict[str, Any],
) -> None:
    watch_pass()
    rows = alerts_data(query={})["slower"]
    found = {(r["endpoint_name"], r["metric"]): r for r in rows}
    assert set(found) == {("dropped", "throughput_mbps"), ("laggy", "latency_p50_us")}
    dropped = found["dropped", "throughput_mbps"]
    assert (dropped["latest"], dropped["baseline"], dropped["baseline_runs"]) == (60, 100, 7)
    assert dropped["change"] == pytest.approx(-0.4)
    assert found["laggy", "latency_p50_us"]["change"] == pytest.approx(0.6)
    # The worst first: 1.67x slower, then 1.6x.
    assert [r["endpoint_name"] for r in rows] == ["dropped", "laggy"]


def test_slower_thresholds_and_metrics_are_the_operators(nightly: dict[str, Any]) -> None:
    watch_pass()
    rows = alerts_data(query={"drop_pct": 15.0, "metric": ["throughput_mbps"]})["slower"]
    assert {r["endpoint_name"] for r in rows} == {"dropped", "dipped"}
    rows = alerts_data(query={"rise_pct": 70.0, "metric": ["latency_p50_us"]})["slower"]
    assert rows == []


def test_a_metric_named_twice_is_checked_once(client: Client, nightly: dict[str, Any]) -> None:
    """The schema fuzzer's find: a repeated metric made the SQL's column list disagree with
    its query (500)."""
    watch_pass()
    login(client, "viewer")
    twice = "metric=throughput_mbps&metric=wall_s&metric=throughput_mbps"
    response = client.get(f"/api/v1/alerts/?{twice}")
    assert response.status_code == 200, response.content
    slower = [(r["endpoint_name"], r["metric"]) for r in response.json()["slower"]]
    assert slower == [("dropped", "throughput_mbps")]


def test_alerts_take_seven_queries(
    failing: dict[str, Any], nightly: dict[str, Any], django_assert_num_queries: Any
) -> None:
    watch_pass()
    # The last pass, the nights rolled up, the newest run; failing, slower, tester faults;
    # the rows' live regressions.
    with django_assert_num_queries(7):
        data = alerts_data(query={})
    assert data["failing"] and data["slower"]


def test_a_run_after_the_pass_changes_nothing_until_the_next_pass(
    client: Client, failing: dict[str, Any]
) -> None:
    watch_pass()
    broken = failing["broken_3"]
    # After every run above (tonight's cancelled one is a minute ago before 02:00 UTC).
    newest = max(run.created_at for run in failing.values())
    later = max(timezone.now() - timedelta(minutes=10), newest + timedelta(seconds=1))
    fixed = RunMaker()
    fixed.campaign, fixed.files = broken.campaign, {broken.endpoint_id: broken.test_file}
    fixed.add(broken.endpoint, broken.vantage_point, S.SUCCEEDED, later, throughput_mbps=10)
    login(client, "viewer")
    data = client.get("/api/v1/alerts/").json()
    assert broken.pk in [r["run"] for r in data["failing"]]
    assert data["as_of"]["newer_runs"] is True
    html = client.get("/alerts/").content.decode()
    assert "As of the last watch pass at" in html and "Runs created since" in html
    watch_pass()
    data = client.get("/api/v1/alerts/").json()
    assert broken.pk not in [r["run"] for r in data["failing"]]
    assert data["as_of"]["newer_runs"] is False


def test_before_the_first_pass_the_page_says_the_watch_has_not_run(
    client: Client, failing: dict[str, Any]
) -> None:
    login(client, "viewer")
    data = client.get("/api/v1/alerts/").json()
    assert (data["failing_total"], data["as_of"]["pass_at"]) == (0, None)
    assert "The watch has not run yet" in client.get("/alerts/").content.decode()


def test_home_shows_the_regression_the_pass_opened_beside_what_fails(
    client: Client, failing: dict[str, Any]
) -> None:
    """The refused, timed-out, refused-auth nights of `broken` are functional failures: the
    same pass that stores them as failing opens their availability regression."""
    watch_pass()
    regression = Regression.objects.get(
        endpoint=failing["broken_3"].endpoint, metric="availability", state="open"
    )
    login(client, "viewer")
    html = client.get("/").content.decode()
    regressions, _, rest = html.partition('id="failing-title"')
    assert f'href="/regressions/{regression.pk}/"' in regressions
    assert f'href="/runs/{failing["broken_3"].pk}/"' in rest
    # The failing row links to the same regression.
    assert f'href="/regressions/{regression.pk}/">regression (open)' in rest
    rows = client.get("/api/v1/alerts/").json()["failing"]
    broken = next(r for r in rows if r["run"] == failing["broken_3"].pk)
    assert (broken["regression"]["id"], broken["regression"]["state"]) == (regression.pk, "open")


def login(client: Client, role: str | None) -> None:
    user = User.objects.create_user(f"user-{role}")
    if role:
        user_set_role(user=user, role=role)
    client.force_login(user)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("days=0", "days"),
        ("days=1000", "days"),
        ("metric=bytes_wire", "metric"),
        ("drop_pct=150", "drop_pct"),
        ("rise_pct=abc", "rise_pct"),
        ("endpoint=999999", "endpoint"),
        ("fraction=-1", "fraction"),
    ],
)
def test_api_bad_parameters_are_a_400_naming_the_field(
    client: Client, query: str, field: str
) -> None:
    login(client, "viewer")
    response = client.get(f"/api/v1/alerts/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_api_and_page_show_the_same_rows(client: Client, failing: dict[str, Any]) -> None:
    watch_pass()
    login(client, "viewer")
    data = client.get("/api/v1/alerts/").json()
    assert data["failing_total"] == 2
    assert [r["run"] for r in data["failing"]] == [failing["flaky_q"].pk, failing["broken_3"].pk]
    html = client.get("/alerts/").content.decode()
    assert f'href="/runs/{failing["broken_3"].pk}/"' in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img src=x" not in html


def test_api_refuses_users_without_a_role(client: Client) -> None:
    assert client.get("/api/v1/alerts/").status_code in (401, 403)
    login(client, None)
    assert client.get("/api/v1/alerts/").status_code == 403


def test_home_shows_failing_slower_and_running(
    client: Client,
    failing: dict[str, Any],
    nightly: dict[str, Any],
    django_assert_max_num_queries: Any,
) -> None:
    make = RunMaker()
    running = make.add(make.endpoint("busy"), VantagePointFactory(name="cern"), S.RUNNING, night(0))
    watch_pass()
    login(client, "viewer")
    # Alerts, the running runs and the queue, their progress, and the vantage points'
    # worker health (issue 11), the regressions, tester faults and expiring credentials
    # (issue 16), the watch's last pass the alerts come from: a constant, whatever the history.
    # 13, 2 for the Regressions, 4 tester faults and credentials, 3 for the pass (as of), 1
    # for the rows' regressions.
    with django_assert_max_num_queries(23):
        html = client.get("/").content.decode()
    assert 'id="failing"' in html and f'href="/runs/{failing["broken_3"].pk}/"' in html
    assert "-40%" in html
    assert f'data-run-id="{running.pk}"' in html
    assert "/compare/?endpoint=" in html


def test_slower_looks_at_most_a_month_back() -> None:
    make = RunMaker()
    cern = VantagePointFactory(name="cern")
    old = make.endpoint("old")
    for days_ago in range(41, 48):
        make.add(old, cern, S.SUCCEEDED, night(days_ago), throughput_mbps=100)
    make.add(old, cern, S.SUCCEEDED, night(40), throughput_mbps=10)
    watch_pass()
    data = alerts_data(query={"days": 60})
    assert (data["slower"], data["slower_days"]) == ([], 31)


def test_the_page_lists_the_first_rows_and_all_of_them_when_asked(
    client: Client, failing: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from webapp.dashboards import views

    monkeypatch.setattr(views, "PAGE_ROWS", 1)  # the page's 100, for a history of two rows
    watch_pass()
    login(client, "viewer")
    first = client.get("/alerts/?days=7").content.decode()
    assert f'href="/runs/{failing["flaky_q"].pk}/"' in first
    assert f'href="/runs/{failing["broken_3"].pk}/"' not in first
    assert (
        'the first 1 are listed (<a href="?days=7&amp;all=1" id="failing-all">list all 2</a>'
        in (first)
    )
    every = client.get("/alerts/?days=7&all=1").content.decode()
    assert f'href="/runs/{failing["broken_3"].pk}/"' in every
    assert 'id="failing-all"' not in every
    assert client.get("/api/v1/alerts/?days=7").json()["failing_total"] == 2


def test_home_and_alerts_name_metrics_in_words_with_their_units(
    client: Client, nightly: dict[str, Any]
) -> None:
    """The slower lists and the alerts' metric choices said "latency_p50_us (us)"."""
    watch_pass()
    login(client, "viewer")
    for path in ("/", "/alerts/"):
        html = client.get(path).content.decode()
        assert "<td>Read latency p50 (µs)</td>" in html and "<td>Throughput (MB/s)</td>" in html
        assert "latency_p50_us (us)" not in html and "throughput_mbps (MB/s)" not in html
    assert '<option value="open_s">Open time (p50 over clients, s)</option>' in html
