"""The home and alerts pages in Chromium: a lab run refused by a closed port is failing now,
a week of nights then a slow one is slower, a running run is listed with its progress; the
links lead to the run, the filters change the lists and the URL, the CSV is the rows listed,
and hostile names stay text."""

from __future__ import annotations

import csv
import io
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.webapp.dashboards.status_runs import RunMaker, night, watch_pass
from tests.webapp.factories import (
    CampaignFactory,
    SiteFactory,
    TestFileFactory,
    vantage_point_in_process,
)
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint
from webapp.sites.services import vantage_point_local

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)>"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def measure(endpoint: Endpoint) -> Run:
    """A run of `endpoint` launched and measured in this process (vantage_point_in_process)."""
    campaign = CampaignFactory(
        endpoints=[endpoint], vantage_points=[vantage_point_in_process()], clients=[2]
    )
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    return run


def alerts_history(lab: Any) -> dict[str, Run]:
    """A lab run that succeeds, one refused by a closed port on a hostile site, a week of
    nights then a slow night on another endpoint, and a running run; then the watch's pass."""
    lab_register(lab=lab)
    ok = measure(Endpoint.objects.get(name="local-root"))
    assert ok.status == Run.Status.SUCCEEDED, ok.errors
    closed = TestFileFactory(
        endpoint__name="closed-root",
        endpoint__site=SiteFactory(name=HOSTILE),
        endpoint__base_url=f"root://127.0.0.1:{closed_port()}/",
    ).endpoint
    refused = measure(closed)
    assert refused.status == Run.Status.FAILED and refused.errors[0]["class"] == "refused"
    make = RunMaker()
    slow = make.endpoint("slow-root")
    local = vantage_point_local()
    for days_ago in range(2, 9):
        make.add(slow, local, Run.Status.SUCCEEDED, night(days_ago), throughput_mbps=100)
    slower = make.add(slow, local, Run.Status.SUCCEEDED, night(1), throughput_mbps=40)
    running = make.add(slow, local, Run.Status.RUNNING, night(0))
    watch_pass()  # the alerts read what the watch stored
    return {"ok": ok, "refused": refused, "slower": slower, "running": running}


def query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def rows(page: Any, table: str) -> list[list[str]]:
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        f"#{table} tbody tr",
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))",
    )


def test_home_shows_what_fails_got_slower_and_runs(
    lab: Any,
    live_server: Any,
    browser_page: Callable[..., Any],
    screenshot: Callable[[Any, str], Path],
) -> None:
    runs = alerts_history(lab)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/")
    (failing,) = rows(page, "failing")
    assert failing[0] == f"closed-root {HOSTILE} · root"
    assert failing[3].startswith("failed refused")
    assert failing[5] == "1"  # failures in a row
    assert failing[6] == "never"  # no good run
    (slower,) = rows(page, "slower")
    assert slower[0].startswith("slow-root")
    assert (slower[3], slower[5], slower[6], slower[7]) == (
        "Throughput (MB/s)", "40.0", "100.0 (7 runs)", "-60%",
    )  # fmt: skip
    (running,) = rows(page, "running")
    assert running[0] == str(runs["running"].pk) and running[1] == "running"
    assert page.locator("img[src=x]").count() == 0
    screenshot(page, "home")
    watch.assert_clean()

    page.click(f"#failing a[href='/runs/{runs['refused'].pk}/']")
    page.wait_for_url(f"**/runs/{runs['refused'].pk}/")
    assert "refused" in page.locator("main").inner_text()
    watch.assert_clean()


def test_alerts_lists_filter_and_download_what_they_show(
    lab: Any,
    live_server: Any,
    browser_page: Callable[..., Any],
    screenshot: Callable[[Any, str], Path],
) -> None:
    runs = alerts_history(lab)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/alerts/")
    assert len(rows(page, "failing-table")) == 1
    assert len(rows(page, "slower-table")) == 1
    screenshot(page, "alerts")
    with page.expect_download() as caught:
        page.click("#failing-card [data-download=csv]")
    (drawn,) = csv.DictReader(io.StringIO(Path(caught.value.path()).read_text()))
    assert (drawn["run"], drawn["site_name"], drawn["error_class"]) == (
        str(runs["refused"].pk), HOSTILE, "refused",
    )  # fmt: skip
    with page.expect_download() as caught:
        page.click("#slower-card [data-download=json]")
    assert '"change": -0.6' in Path(caught.value.path()).read_text()

    # A drop of 70% or more: the 60% drop is no longer listed; the URL keeps the filter.
    page.fill("#id_drop_pct", "70")
    page.click("#alerts-form button[type=submit]")
    page.wait_for_url("**drop_pct=70*")
    assert query(page) == {"drop_pct": ["70"]}
    assert rows(page, "slower-table") == [["Nothing got slower with these filters."]]
    assert len(rows(page, "failing-table")) == 1
    # Only the http endpoints: nothing fails there.
    page.select_option("#id_protocol", "http")
    page.click("#alerts-form button[type=submit]")
    page.wait_for_url("**protocol=http*")
    assert rows(page, "failing-table") == [["Nothing is failing with these filters."]]
    watch.assert_clean()
