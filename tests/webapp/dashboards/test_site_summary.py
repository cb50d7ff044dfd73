"""The site summary against real rows (PostgreSQL, and SQLite in bin/test's SQLite stage):
availability per day and week, the failure rate and its trend, the latest key figures,
the recent failures, bounded queries; the site page and GET /api/v1/sites/{id}/summary/."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.webapp.dashboards.status_runs import P, Q, RunMaker, night
from tests.webapp.factories import SiteFactory, VantagePointFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Run
from webapp.dashboards.selectors.site_summary import DAYS, RECENT_FAILURES, WEEKS, site_summary
from webapp.sites.models import Site

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status
HOSTILE = "<img src=x onerror=alert(1)>"


def error(error_class: str, message: str) -> list[dict[str, Any]]:
    return [{"class": error_class, "message": message, "client": 0}]


@pytest.fixture
def history() -> dict[str, Any]:
    """Site alpha: a root endpoint with a mixed night and a worse last week, an https one
    that only succeeds; site beta (another site) fails, and must not show on alpha's page."""
    make = RunMaker()
    alpha, beta = SiteFactory(name="alpha"), SiteFactory(name="beta")
    root = make.endpoint("a-root", site=alpha)
    https = make.endpoint("a-https", site=alpha, protocol="https")
    other = make.endpoint("b-root", site=beta)
    cern, fnal = VantagePointFactory(name="cern"), VantagePointFactory(name="fnal")
    runs: dict[str, Run] = {}
    # Yesterday on a-root: 2 succeeded, 1 partial, 1 failed, 1 timeout; a cancelled and a
    # queued run count nowhere.
    for i, (status, vp) in enumerate(
        [(S.SUCCEEDED, cern), (S.SUCCEEDED, fnal), (S.PARTIAL, cern), (S.FAILED, fnal)]
    ):
        runs[f"y{i}"] = make.add(root, vp, status, night(1), throughput_mbps=100 + i)
    runs["timeout"] = make.add(
        root, cern, S.TIMEOUT, night(1, hour=3), errors=error("timeout", "no answer in 60 s")
    )
    make.add(root, cern, S.CANCELLED, night(1))
    make.add(root, fnal, S.QUEUED, night(0))
    # The 7 days before: a-root succeeded every night (its failure rate rose).
    for days_ago in range(7, 14):
        make.add(root, cern, S.SUCCEEDED, night(days_ago), throughput_mbps=90)
    # 20 days ago: in the weekly strip, not the daily one.
    runs["old_failure"] = make.add(
        root, cern, S.FAILED, night(20), errors=error("auth", "token expired\nscope: read")
    )
    # a-https: the latest succeeded run of P is the key figure; a newer one of Q and a
    # newer failure of P are not.
    runs["https_key"] = make.add(
        https, fnal, S.SUCCEEDED, night(2), throughput_mbps=812.5, open_s=0.0123, ttfb_s=0.0456
    )
    make.add(https, cern, S.SUCCEEDED, night(1), params=Q, throughput_mbps=5.0)
    runs["https_failed"] = make.add(
        https,
        cern,
        S.FAILED,
        night(0, hour=1),
        errors=error("refused", "connection refused by root://user:secret@host:1094/\nmore"),
    )
    make.add(other, cern, S.FAILED, night(1), errors=error("refused", "beta is down"))
    return {"alpha": alpha, "beta": beta, "root": root, "https": https, "runs": runs}


def by_name(summary: Any) -> dict[str, Any]:
    return {e["name"]: e for e in summary["endpoints"]}


def day(cells: list[dict[str, Any]], when: date) -> dict[str, Any]:
    return next(c for c in cells if c["start"] == when.isoformat())


def test_availability_per_day_counts_partial_as_half_and_leaves_out_cancelled(
    history: dict[str, Any],
) -> None:
    summary = site_summary(site=history["alpha"])
    today = timezone.now().date()
    root = by_name(summary)["a-root"]
    assert [c["start"] for c in root["days"]] == [
        (today - timedelta(days=n)).isoformat() for n in range(DAYS - 1, -1, -1)
    ]
    yesterday = day(root["days"], today - timedelta(days=1))
    assert yesterday == {
        "start": (today - timedelta(days=1)).isoformat(),
        "succeeded": 2,
        "partial": 1,
        "failed": 2,  # failed and timed out
        "runs": 5,
        "availability": 0.5,  # (2 + 1/2) / 5
        "rating": "bad",
    }
    assert day(root["days"], today - timedelta(days=8))["availability"] == 1.0
    assert day(root["days"], today - timedelta(days=8))["rating"] == "good"
    # Today a-root has only a queued run: no ended runs, no availability.
    assert root["days"][-1] | {"start": ""} == {
        "start": "",
        "succeeded": 0,
        "partial": 0,
        "failed": 0,
        "runs": 0,
        "availability": None,
        "rating": "none",
    }


def test_availability_per_week_starts_on_monday_and_reaches_back_eight_weeks(
    history: dict[str, Any],
) -> None:
    summary = site_summary(site=history["alpha"])
    today = timezone.now().date()
    monday = today - timedelta(days=today.weekday())
    root = by_name(summary)["a-root"]
    assert [c["start"] for c in root["weeks"]] == [
        (monday - timedelta(weeks=n)).isoformat() for n in range(WEEKS - 1, -1, -1)
    ]
    assert sum(c["runs"] for c in root["weeks"]) == 5 + 7 + 1
    old = (today - timedelta(days=20)).isoformat()
    week_of_old = next(c for c in root["weeks"] if c["start"] <= old < _plus_week(c["start"]))
    assert week_of_old["failed"] >= 1
    assert old not in [c["start"] for c in root["days"]]


def _plus_week(start: str) -> str:
    return (date.fromisoformat(start) + timedelta(days=7)).isoformat()


def test_failure_rate_of_the_last_week_against_the_week_before(history: dict[str, Any]) -> None:
    summary = site_summary(site=history["alpha"])
    root = by_name(summary)["a-root"]
    assert root["failure_rate"] == {"last": 0.5, "before": 0.0, "trend": "worse"}
    https = by_name(summary)["a-https"]
    # 3 ended runs in the last 7 days (one failed), none before: no trend.
    assert https["failure_rate"]["last"] == pytest.approx(1 / 3)
    assert https["failure_rate"]["before"] is None
    assert https["failure_rate"]["trend"] == ""
    # The whole site: a-root's 5 + a-https's 3 in the last week.
    assert summary["failure_rate"]["last"] == pytest.approx((2.5 + 1) / 8)
    assert summary["failure_rate"]["trend"] == "worse"
    yesterday = timezone.now().date() - timedelta(days=1)
    assert day(summary["site_days"], yesterday)["runs"] == 5 + 1  # beta's failure left out


def test_key_figures_are_each_endpoints_latest_success_of_the_most_measured_set(
    history: dict[str, Any],
) -> None:
    summary = site_summary(site=history["alpha"])
    assert summary["parameter_set"] is not None
    assert {k: summary["parameter_set"][k] for k in P} == P
    https = by_name(summary)["a-https"]["latest"]
    key = history["runs"]["https_key"]
    assert https == {
        "run": key.pk,
        "run_url": f"/runs/{key.pk}/",
        "at": key.created_at,
        "vantage_point": "fnal",
        "throughput_mbps": 812.5,
        "open_s": 0.0123,
        "ttfb_s": 0.0456,
        "wall_s": None,
    }
    # a-root's latest successes of P were yesterday, two at the same time: the newer id.
    assert by_name(summary)["a-root"]["latest"]["run"] == history["runs"]["y1"].pk


def test_recent_failures_newest_first_with_error_class_and_first_line(
    history: dict[str, Any],
) -> None:
    failures = site_summary(site=history["alpha"])["recent_failures"]
    runs = history["runs"]
    assert [f["run"] for f in failures[:3]] == [
        runs["https_failed"].pk,
        runs["timeout"].pk,
        # y3 (failed) and y2 (partial), at the same time: the newer id first
        runs["y3"].pk,
    ]
    assert [f["status"] for f in failures] == ["failed", "timeout", "failed", "partial", "failed"]
    first = failures[0]
    assert first["error_class"] == "refused"
    assert first["message"] == "connection refused by root://host:1094/"  # first line, no secret
    assert first["endpoint_name"] == "a-https" and first["protocol"] == "https"
    assert first["vantage_point"] == "cern"
    assert first["run_url"] == f"/runs/{runs['https_failed'].pk}/"
    assert failures[-1]["message"] == "token expired"
    assert "beta is down" not in str(failures)


def test_recent_failures_are_the_newest_twenty(history: dict[str, Any]) -> None:
    make = RunMaker()
    endpoint = make.endpoint("a-davs", site=history["alpha"], protocol="davs")
    vp = VantagePointFactory(name="ral")
    for minute in range(RECENT_FAILURES + 5):
        at = night(0, hour=0) + timedelta(minutes=minute)
        make.add(endpoint, vp, S.FAILED, at, errors=error("server-error", f"n{minute}"))
    failures = site_summary(site=history["alpha"])["recent_failures"]
    assert len(failures) == RECENT_FAILURES
    assert failures[0]["run"] == history["runs"]["https_failed"].pk  # 01:00, the newest
    assert [f["message"] for f in failures[1:]] == [
        f"n{minute}" for minute in range(RECENT_FAILURES + 4, 5, -1)
    ]


def test_links_to_compare_and_matrix_name_the_site_and_the_parameter_set(
    history: dict[str, Any],
) -> None:
    summary = site_summary(site=history["alpha"])
    alpha = history["alpha"].pk
    compare = urlsplit(summary["compare_url"])
    assert compare.path == "/compare/"
    assert parse_qs(compare.query) == {
        "site": [str(alpha)],
        "metric": ["throughput_mbps"],
        **{k: [str(v)] for k, v in P.items()},
    }
    matrix = urlsplit(summary["matrix_url"])
    assert matrix.path == "/matrix/"
    assert parse_qs(matrix.query)["site"] == [str(alpha)]
    https = by_name(summary)["a-https"]
    assert parse_qs(urlsplit(https["compare_url"]).query)["endpoint"] == [str(history["https"].pk)]
    assert parse_qs(urlsplit(https["matrix_url"]).query)["protocol"] == ["https"]


def test_a_site_without_runs_or_endpoints(db: Any) -> None:
    empty = site_summary(site=SiteFactory(name="empty"))
    assert empty["endpoints"] == [] and empty["recent_failures"] == []
    assert empty["parameter_set"] is None
    assert all(c["availability"] is None for c in empty["site_days"] + empty["site_weeks"])
    make = RunMaker()
    quiet = make.endpoint("quiet", site=SiteFactory(name="quiet"))
    summary = site_summary(site=Site.objects.get(pk=quiet.site_id))
    assert by_name(summary)["quiet"]["latest"] is None
    assert "site=" in summary["compare_url"]


def test_queries_are_bounded_whatever_the_endpoints_and_history(
    history: dict[str, Any], django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(5):
        small = site_summary(site=history["alpha"])
    make = RunMaker()
    vp = VantagePointFactory(name="ral")
    for i in range(5):
        endpoint = make.endpoint(f"more-{i}", site=history["alpha"], protocol="davs")
        for days_ago in range(0, 40, 3):
            make.add(endpoint, vp, S.SUCCEEDED, night(days_ago), throughput_mbps=i)
            make.add(endpoint, vp, S.FAILED, night(days_ago, hour=4), errors=error("auth", "x"))
    with django_assert_num_queries(5):
        large = site_summary(site=history["alpha"])
    assert len(large["endpoints"]) == len(small["endpoints"]) + 5


# The page and the API


def login(client: Client, role: str | None) -> None:
    user = User.objects.create_user(f"user-{role}")
    if role:
        user_set_role(user=user, role=role)
    client.force_login(user)


def test_page_shows_the_summary_above_the_endpoints(
    client: Client, history: dict[str, Any]
) -> None:
    login(client, "viewer")
    response = client.get(f"/sites/{history['alpha'].pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index('id="site-summary"') < html.index("<h2>Endpoints</h2>")
    assert 'id="availability-days"' in html and 'id="availability-weeks"' in html
    assert 'class="avail rating-bad"' in html and ">50%</td>" in html
    assert 'class="avail rating-good"' in html and ">100%</td>" in html
    assert "2 of 5 succeeded, 1 partial, 2 failed" in html
    assert "↑ worse" in html
    assert "812.5 MB/s" in html and "12.3 ms" in html
    summary = site_summary(site=history["alpha"])
    assert f'href="{summary["compare_url"].replace("&", "&amp;")}"' in html
    assert f'href="{summary["matrix_url"].replace("&", "&amp;")}"' in html
    assert "connection refused by root://host:1094/" in html and "secret" not in html
    assert "beta is down" not in html
    # The endpoint management content stays.
    assert f'href="/endpoints/{history["https"].pk}/"' in html


def test_page_writes_hostile_names_as_text(client: Client) -> None:
    make = RunMaker()
    endpoint = make.endpoint(HOSTILE, site=SiteFactory(name="hostile"))
    make.add(
        endpoint,
        VantagePointFactory(name="cern"),
        S.FAILED,
        night(1),
        errors=error("refused", HOSTILE),
    )
    login(client, "viewer")
    html = client.get(f"/sites/{endpoint.site_id}/").content.decode()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_api_answers_viewers_with_the_selectors_data(
    client: Client, history: dict[str, Any]
) -> None:
    login(client, "viewer")
    response = client.get(f"/api/v1/sites/{history['alpha'].pk}/summary/")
    assert response.status_code == 200
    data = response.json()
    assert data["site_name"] == "alpha"
    assert [e["name"] for e in data["endpoints"]] == ["a-https", "a-root"]  # by protocol
    root = next(e for e in data["endpoints"] if e["name"] == "a-root")
    yesterday = (timezone.now().date() - timedelta(days=1)).isoformat()
    assert {"start": yesterday, "availability": 0.5} == {
        k: v
        for k, v in next(c for c in root["days"] if c["start"] == yesterday).items()
        if k in ("start", "availability")
    }
    assert root["failure_rate"]["trend"] == "worse"
    assert data["recent_failures"][0]["error_class"] == "refused"
    assert data["parameter_set"]["label"]


def test_api_unknown_site_is_404_and_strangers_are_refused(client: Client) -> None:
    login(client, "viewer")
    assert client.get("/api/v1/sites/999999/summary/").status_code == 404
    stranger = Client()
    stranger.force_login(User.objects.create_user("nobody"))
    site = SiteFactory()
    assert stranger.get(f"/api/v1/sites/{site.pk}/summary/").status_code in (401, 403)
    assert Client().get(f"/api/v1/sites/{site.pk}/summary/").status_code in (401, 403)


def test_the_summary_is_in_the_openapi_schema(client: Client) -> None:
    login(client, "viewer")
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    answer = schema["paths"]["/api/v1/sites/{id}/summary/"]["get"]["responses"]["200"]
    ref = answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    properties = schema["components"]["schemas"][ref]["properties"]
    assert {"endpoints", "site_days", "site_weeks", "failure_rate", "recent_failures"} <= set(
        properties
    )
