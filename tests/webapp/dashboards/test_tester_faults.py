"""Tester faults never count against an endpoint: a lost, harness, egress or preflight
credential run leaves the site summary, the matrix, the alerts (failing now), compare's
failure strip and the results' Errors as the endpoint's own runs make them, and shows apart,
named by vantage point (docs/watch.md "Tester faults")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.dashboards.status_runs import P, RunMaker, night, watch_pass
from tests.webapp.factories import SiteFactory, VantagePointFactory, page_for, user
from webapp.campaigns.models import Run
from webapp.dashboards.selectors.alerts import alerts_data
from webapp.dashboards.selectors.compare import compare_data, failure_counts
from webapp.dashboards.selectors.matrix import matrix_cells
from webapp.dashboards.selectors.parameter_sets import ParameterSet
from webapp.dashboards.selectors.results import campaign_results
from webapp.dashboards.selectors.site_summary import site_summary

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status


def error(error_class: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"class": error_class, "message": f"{error_class} here", "client": None, **extra}]


TESTER_FAULTS = {
    "lost": (S.FAILED, error("lost")),
    "lost-partial": (S.PARTIAL, error("lost")),
    "harness": (S.FAILED, error("harness")),
    "egress": (S.FAILED, error("egress")),
    "expired-token": (S.FAILED, error("auth", phase="credential")),
}


@pytest.fixture
def history() -> dict[str, Any]:
    """Endpoint good: succeeded each night, then (latest) every kind of tester fault from
    vantage point broken-vp. Endpoint bad: its own auth refusal, the control."""
    make = RunMaker()
    site = SiteFactory(name="tf-site")
    good = make.endpoint("good", site=site)
    bad = make.endpoint("bad", site=site)
    ok_vp, broken_vp = VantagePointFactory(name="ok-vp"), VantagePointFactory(name="broken-vp")
    for days_ago in (3, 2):
        make.add(good, ok_vp, S.SUCCEEDED, night(days_ago), throughput_mbps=100.0)
        make.add(good, broken_vp, S.SUCCEEDED, night(days_ago), throughput_mbps=100.0)
    faults = {
        name: make.add(good, vp, status, night(1, hour=3 + i), errors=errors)
        for i, (name, (status, errors)) in enumerate(TESTER_FAULTS.items())
        for vp in (broken_vp, ok_vp)
    }
    refused = make.add(bad, ok_vp, S.FAILED, night(1), errors=error("auth"))
    return {
        "make": make,
        "site": site,
        "good": good,
        "bad": bad,
        "faults": faults,
        "refused": refused,
    }


def test_site_summary_counts_only_the_endpoints_own_runs(history: dict[str, Any]) -> None:
    summary = site_summary(site=history["site"])
    by_name = {e["name"]: e for e in summary["endpoints"]}
    good_days = [d for d in by_name["good"]["days"] if d["runs"]]
    assert [(d["succeeded"], d["partial"], d["failed"]) for d in good_days] == [(2, 0, 0)] * 2
    assert {d["availability"] for d in good_days} == {1.0}
    assert by_name["good"]["failure_rate"]["last"] == 0.0
    assert by_name["bad"]["failure_rate"]["last"] == 1.0
    assert [f["run"] for f in summary["recent_failures"]] == [history["refused"].pk]


def test_matrix_cell_of_an_endpoint_with_tester_faults_is_its_last_good_run(
    history: dict[str, Any],
) -> None:
    cells = matrix_cells(metric="throughput_mbps", parameter_set=ParameterSet(**P))
    failed = {(c["endpoint_name"], c["vantage_point"]): c["failed"] for c in cells}
    assert failed == {
        ("good", "ok-vp"): False,
        ("good", "broken-vp"): False,
        ("bad", "ok-vp"): True,
    }


def test_alerts_list_tester_faults_by_vantage_point_never_as_failing(
    history: dict[str, Any],
) -> None:
    watch_pass()
    data = alerts_data(query={})
    assert [row["run"] for row in data["failing"]] == [history["refused"].pk]
    faults = {
        (r["vantage_point"], r["error_class"], r["phase"]): r["runs"] for r in data["tester_faults"]
    }
    expected = {}
    for vp in ("broken-vp", "ok-vp"):
        expected.update(
            {
                (vp, "lost", ""): 2,
                (vp, "harness", ""): 1,
                (vp, "egress", ""): 1,
                (vp, "auth", "credential"): 1,
            }
        )
    assert faults == expected


def test_home_and_alerts_pages_show_tester_faults_apart(history: dict[str, Any]) -> None:
    watch_pass()
    page = page_for(user("viewer", "viewer"))
    for url in ("/", "/alerts/"):
        html = page.get(url).content.decode()
        failing, _, rest = html.partition('id="tester-faults')
        assert f'href="/runs/{history["refused"].pk}/"' in failing
        assert "broken-vp" in rest and "the worker stopped reporting (lost)" in rest
        assert "the credential failed before any request (auth)" in rest


def test_compare_marks_tester_faults_apart_in_its_failure_strip(
    history: dict[str, Any],
) -> None:
    today = timezone.now().date()
    data = compare_data(
        endpoints=[history["good"]],
        metric="throughput_mbps",
        since=today - timedelta(days=7),
        until=today,
        parameters=P,
    )
    assert {f["tester_fault"] for f in data["failures"]} == {True}
    assert failure_counts(data["failures"]) == {"tester-fault": 8}


def test_results_errors_name_tester_faults_as_such(history: dict[str, Any]) -> None:
    results = campaign_results(campaign=history["make"].campaign)
    classes = {(f["error_class"], f["tester_fault"]) for f in results.failures}
    assert classes == {
        ("tester fault: lost", True),
        ("tester fault: harness", True),
        ("tester fault: egress", True),
        ("tester fault: auth", True),
        ("auth", False),
    }


def test_run_page_says_tester_fault(history: dict[str, Any]) -> None:
    page = page_for(user("viewer", "viewer"))
    lost = history["faults"]["lost"]
    html = page.get(f"/runs/{lost.pk}/").content.decode()
    assert "tester fault: the worker stopped reporting (lost)" in html
    refused = page.get(f"/runs/{history['refused'].pk}/").content.decode()
    assert "tester fault" not in refused
