"""The matrix page in Chromium with runs measured on the lab: the cells show the runs'
values, the controls change the cells and the URL, the boundaries colour them, a cell opens
the comparison for its pair, the CSV is the cells drawn, hostile names stay text, and a
database with nothing measured says what to do; the defaults colour a first visit and
thresholds an operator saves (on the page or through the API) colour everyone's matrix."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import User

from tests.webapp.dashboards.status_runs import RunMaker, night
from tests.webapp.factories import (
    IN_PROCESS,
    CampaignFactory,
    SiteFactory,
    VantagePointFactory,
    vantage_point_in_process,
)
from webapp.accounts.services import api_token_create
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.core.units import format_duration_s
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)>"
LAB_ENDPOINTS = ("local-root", "local-http", "near-root")
PARAMS = {
    "method": "direct",
    "pattern": "random",
    "read_size": 65536,
    "fraction": 0.1,
    "clients": 2,
}


def measured_matrix(lab: Any) -> dict[str, Run]:
    """Three lab endpoints measured in this process (vantage point IN_PROCESS), plus runs
    recorded from a second vantage point: one timed out, one on a site with a hostile name."""
    lab_register(lab=lab)
    endpoints = [Endpoint.objects.get(name=name) for name in LAB_ENDPOINTS]
    campaign = CampaignFactory(
        name="matrix", endpoints=endpoints, vantage_points=[vantage_point_in_process()],
        methods=["direct"], patterns=["random"], read_sizes=[65536], fractions=[0.1],
        clients=[2],
    )  # fmt: skip
    runs = {}
    for run in campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL):
        run_execute(run_id=run.pk, worker="test@host")
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED, run.errors
        runs[run.endpoint.name] = run
    make = RunMaker()
    ral = VantagePointFactory(name="ral")
    make.files[endpoints[2].pk] = endpoints[2].default_file
    make.add(endpoints[2], ral, Run.Status.SUCCEEDED, night(2), throughput_mbps=55.5, wall_s=0.5)
    runs["ral-timeout"] = make.add(
        endpoints[2], ral, Run.Status.TIMEOUT, night(1),
        errors=[{"class": "timeout", "message": HOSTILE, "client": 0}],
    )  # fmt: skip
    hostile = make.endpoint("hostile-site-root", site=SiteFactory(name=HOSTILE))
    runs["hostile"] = make.add(
        hostile, ral, Run.Status.SUCCEEDED, night(1), throughput_mbps=12.25, wall_s=3.0
    )
    return runs


def cell(page: Any, endpoint: str, vantage_point: str) -> Any:
    """The cell of the matrix table at (endpoint row, vantage point column)."""
    headers = page.eval_on_selector_all(
        "table.matrix thead th", "cells => cells.map(c => c.textContent.trim())"
    )
    column = headers.index(vantage_point)  # the first header is the row headers' column
    row = page.locator("table.matrix tbody tr").filter(has=page.locator("th", has_text=endpoint))
    return row.locator("td").nth(column - 1)


def query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def download_csv(page: Any) -> list[dict[str, str]]:
    with page.expect_download() as caught:
        page.click("#matrix-card [data-download=csv]")
    return list(csv.DictReader(io.StringIO(Path(caught.value.path()).read_text())))


def test_the_matrix_shows_measured_runs_and_follows_its_controls(
    lab: Any,
    live_server: Any,
    browser_page: Callable[..., Any],
    screenshot: Callable[[Any, str], Path],
) -> None:
    runs = measured_matrix(lab)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/matrix/")
    assert (
        page.locator("[data-role=parameter-set]").inner_text()
        == "direct · random · 64 KiB · 0.1 · 2 clients"
    )
    headers = page.eval_on_selector_all(
        "table.matrix thead th", "c => c.map(x => x.textContent.trim())"
    )
    assert headers == ["Endpoint", IN_PROCESS, "ral"]
    for name in LAB_ENDPOINTS:
        value = cell(page, name, IN_PROCESS).locator(".value").inner_text()
        assert value == f"{runs[name].throughput_mbps:,.1f}"
    timed_out = cell(page, "near-root", "ral")
    assert timed_out.locator(".value").inner_text() == "55.5"  # the last measured value
    assert timed_out.locator(".fail").inner_text() == "✗ timeout"
    assert "failed" in timed_out.get_attribute("class")
    assert cell(page, "local-root", "ral").get_attribute("class") == "cell empty"

    # Hostile names are text: in the row header, and in the downloads.
    assert page.locator("table.matrix th", has_text=HOSTILE).count() == 1
    assert page.locator("img[src=x]").count() == 0
    drawn = download_csv(page)
    assert len(drawn) == page.locator("td.cell:not(.empty)").count() == 5
    by_pair = {(r["vantage_point"], r["endpoint_name"]): r for r in drawn}
    local_root = runs["local-root"]
    assert float(by_pair[IN_PROCESS, "local-root"]["value"]) == pytest.approx(
        local_root.throughput_mbps
    )
    assert by_pair["ral", "hostile-site-root"]["site_name"] == HOSTILE
    assert by_pair["ral", "near-root"]["failed"] == "true"

    # Another metric: the URL keeps it and the cells show its values.
    page.select_option("#id_metric", "wall_s")
    page.wait_for_url("**/matrix/?metric=wall_s*")
    assert query(page)["metric"] == ["wall_s"]
    value = cell(page, "local-root", IN_PROCESS).locator(".value").inner_text()
    assert value == format_duration_s(local_root.wall_s)  # "10.2 ms": the pages' units
    assert page.locator("h2#matrix-title").inner_text().startswith("Wall time (s): latest")

    # Boundaries colour the cells (lower is better for wall time) and stay in the URL.
    page.fill("#id_good", "1")
    page.fill("#id_bad", "2.5")
    page.press("#id_bad", "Enter")
    page.wait_for_url("**bad=2.5*")
    assert query(page)["good"] == ["1"]
    assert "rating-good" in cell(page, "local-root", IN_PROCESS).get_attribute("class")
    assert "rating-bad" in cell(page, "hostile-site-root", "ral").get_attribute("class")  # 3 s
    ratings = {(r["vantage_point"], r["endpoint_name"]): r["rating"] for r in download_csv(page)}
    assert ratings["ral", "hostile-site-root"] == "bad"
    assert ratings[IN_PROCESS, "local-root"] == "good"
    screenshot(page, "matrix")
    watch.assert_clean()

    # A cell opens the comparison of its pair, with the metric and the parameter set.
    cell(page, "local-root", IN_PROCESS).locator("a").click()
    page.wait_for_url("**/compare/?*")
    opened = query(page)
    assert opened["endpoint"] == [str(local_root.endpoint_id)]
    assert opened["vantage_point"] == [IN_PROCESS]
    assert opened["metric"] == ["wall_s"]
    assert {k: opened[k][0] for k in PARAMS} == {k: str(v) for k, v in PARAMS.items()}


def test_the_site_by_protocol_view(
    lab: Any, live_server: Any, browser_page: Callable[..., Any]
) -> None:
    measured_matrix(lab)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/matrix/")
    page.select_option("#id_view", "site-protocol")
    page.wait_for_url("**view=site-protocol*")
    headers = page.eval_on_selector_all(
        "table.matrix thead th", "c => c.map(x => x.textContent.trim())"
    )
    assert headers == ["Site", "http", "root"]
    rows = page.eval_on_selector_all(
        "table.matrix tbody th", "c => c.map(x => x.textContent.trim())"
    )
    assert HOSTILE in rows and "lab-local" in rows
    near = page.locator("table.matrix tbody tr").filter(has=page.locator("th", has_text="lab-near"))
    assert near.locator(".fail").inner_text() == "✗ 1 of 2 failed"
    assert len(download_csv(page)) == page.locator("td.cell:not(.empty)").count()
    watch.assert_clean()


def test_a_bad_boundary_is_named_and_nothing_measured_says_what_to_do(
    live_server: Any, browser_page: Callable[..., Any]
) -> None:
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/matrix/")
    assert "Nothing has been measured yet" in page.locator("#matrix-card").inner_text()
    page.fill("#id_good", "10")
    page.press("#id_good", "Enter")
    page.wait_for_url("**good=10*")
    assert page.locator("#id_bad_error").inner_text() == (
        "bad: give both good and bad boundaries, or neither"
    )
    watch.errors = [e for e in watch.errors if "400" not in e]  # the page answers 400
    watch.assert_clean()


def test_the_matrix_is_coloured_on_first_visit_and_by_thresholds_saved_for_everyone(
    live_server: Any, browser_page: Callable[..., Any]
) -> None:
    make = RunMaker()
    cern = VantagePointFactory(name="cern")
    fast, slow = make.endpoint("fast-root"), make.endpoint("slow-root")
    make.add(fast, cern, Run.Status.SUCCEEDED, night(1), throughput_mbps=150.0, wall_s=2.0)
    make.add(slow, cern, Run.Status.SUCCEEDED, night(1), throughput_mbps=40.0, wall_s=20.0)

    def ratings(page: Any) -> dict[str, str]:
        return {
            name: next(
                c for c in cell(page, name, "cern").get_attribute("class").split()
                if c.startswith("rating-")
            )
            for name in ("fast-root", "slow-root")
        }  # fmt: skip

    def source(page: Any) -> str:
        return str(page.locator("[data-role=threshold-source]").inner_text())

    # First visit, nothing saved: the defaults colour the cells, and the page says so.
    viewer, viewer_watch = browser_page("viewer")
    viewer.goto(f"{live_server.url}/matrix/")
    assert ratings(viewer) == {"fast-root": "rating-good", "slow-root": "rating-warn"}
    assert source(viewer) == "default thresholds (nobody has saved any for throughput_mbps)"
    assert viewer.locator("#id_good").get_attribute("placeholder") == "100 (default)"
    assert viewer.locator("#threshold-form").count() == 0  # viewers do not save

    # An operator saves thresholds on the page: everyone's matrix uses them.
    operator, operator_watch = browser_page("operator")
    operator.goto(f"{live_server.url}/matrix/")
    operator.fill("#id_thresholds-good", "200")
    operator.fill("#id_thresholds-bad", "50")
    with operator.expect_navigation():
        operator.click("#threshold-form button[type=submit]:has-text('Save for everyone')")
    assert source(operator).startswith("thresholds saved by operator-1 on ")
    viewer.reload()
    assert ratings(viewer) == {"fast-root": "rating-warn", "slow-root": "rating-bad"}
    assert source(viewer).startswith("thresholds saved by operator-1 on ")

    # A boundary the wrong way round is named on the field, and nothing changes.
    operator.fill("#id_thresholds-good", "5")
    operator.fill("#id_thresholds-bad", "50")
    with operator.expect_navigation():
        operator.click("#threshold-form button:has-text('Save for everyone')")
    assert operator.locator("#id_thresholds-bad_error").inner_text() == (
        "bad: throughput_mbps: higher is better, so bad must be at most good"
    )
    viewer.reload()
    assert ratings(viewer) == {"fast-root": "rating-warn", "slow-root": "rating-bad"}

    # Saved through the API, by the same operator's token.
    token = api_token_create(user=User.objects.get(username="operator-1"))
    answer = requests.put(
        f"{live_server.url}/api/v1/matrix/thresholds/throughput_mbps/",
        json={"good": 30, "bad": 10},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    viewer.reload()
    assert ratings(viewer) == {"fast-root": "rating-good", "slow-root": "rating-good"}

    # Boundaries typed in the controls still override, for that view only.
    viewer.fill("#id_good", "100")
    viewer.fill("#id_bad", "45")
    viewer.press("#id_bad", "Enter")
    viewer.wait_for_url("**bad=45*")
    assert ratings(viewer) == {"fast-root": "rating-good", "slow-root": "rating-bad"}
    assert source(viewer) == "the boundaries in this page's address, for this view only"

    # Back to the defaults, on the page.
    operator.goto(f"{live_server.url}/matrix/")
    with operator.expect_navigation():
        operator.click("#threshold-form button:has-text('Back to the defaults')")
    assert source(operator).startswith("default thresholds")
    operator_watch.errors = [e for e in operator_watch.errors if "400" not in e]
    operator_watch.assert_clean()
    viewer_watch.assert_clean()
