"""A newcomer's first campaign, end to end in Chromium against the lab and a real worker: log
in, make a campaign from the form with only the basic fields, preview its runs, bytes and
duration, save, launch, see the running run on home, watch the campaign finish, and read
results whose texts are right while runs are still to come and once they have all ended
(issue 11's acceptance)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.test_results_page import open_results
from tests.celery_worker import WorkerProcess
from webapp.campaigns.models import Campaign, Run
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db(transaction=True)

# The far site is 10 ms away in the test profile: 4 KiB random reads of 5% and 20% of its
# 16 MiB file take ~2 s and ~8 s, long enough to see a run running, short enough to wait for.
ENDPOINT = "far-root"
RUNS = 4  # direct and copy, at two fractions
FINISHED = {Run.Status.SUCCEEDED, Run.Status.PARTIAL, Run.Status.FAILED, Run.Status.CANCELLED}


def poll(page: Any, url: str, found: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Reload `url` until `found()` holds, as a user pressing F5 would."""
    give_up = time.monotonic() + timeout_s
    while True:
        page.goto(url)
        if found():
            return
        if time.monotonic() > give_up:
            raise AssertionError(f"{what}: not after {timeout_s} s")
        time.sleep(0.5)


def log_in(page: Any, server: str, *, then: str) -> None:
    """Through the login form, as the page asking for it sends a visitor there."""
    page.goto(f"{server}{then}")
    page.wait_for_url(re.compile(r".*/accounts/login/.*"))
    page.fill("#id_username", "operator-0")
    page.fill("#id_password", "x")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server}{then}")


def make_campaign(page: Any, endpoint: Endpoint) -> Campaign:
    """Only the basic fields; preview (runs, bytes, duration), then save."""
    page.fill("#id_name", "my first campaign")
    page.select_option("#id_endpoints", str(endpoint.pk))
    page.fill("#id_methods", "direct, copy")
    page.fill("#id_patterns", "random")
    page.fill("#id_read_sizes", "4k")
    page.fill("#id_fractions", "0.05, 0.2")
    page.fill("#id_clients", "1")
    page.get_by_role("button", name="Preview").click()
    page.wait_for_selector("#preview .preview-runs")
    assert page.locator(".preview-runs").inner_text() == str(RUNS)
    facts = page.locator("#preview").inner_text()
    assert "Planned reads" in facts and "MiB" in facts
    assert page.locator(".preview-duration").inner_text()  # an estimate, or why there is none
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r".*/campaigns/\d+/$"))
    return Campaign.objects.get(name="my first campaign")


def test_a_newcomer_makes_launches_watches_and_reads_a_campaign(
    lab: Any,
    celery_worker: WorkerProcess,
    live_server: Any,
    browser_page: Callable[..., Any],
) -> None:
    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name=ENDPOINT)
    page, watch = browser_page("operator")  # user operator-0, password x
    page.context.clear_cookies()  # the fixture logged it in: log in by hand instead

    log_in(page, live_server.url, then="/campaigns/new/")
    campaign = make_campaign(page, endpoint)
    runs = campaign.runs

    page.get_by_role("button", name=f"Launch {RUNS} runs").click()
    page.wait_for_url(re.compile(r".*/runs/.*"))
    assert runs.count() == RUNS

    # Home shows the running run first, with the rest of the queue counted.
    home = f"{live_server.url}/"
    poll(
        page,
        home,
        lambda: (
            runs.filter(status=Run.Status.RUNNING).exists()
            and "my first campaign" in page.locator("#running").inner_text()
            and page.locator("#running tbody tr").first.inner_text().lower().count("running") >= 1
        ),
        "the running run listed first on home",
        120,
    )
    summary = page.locator("#running-summary").inner_text()
    assert re.match(r"1 running, [0-3] queued", summary), summary

    # Mid-campaign the results say how many runs are still to come, and give no advice to
    # add what the campaign already asks for.
    results = f"{live_server.url}/campaigns/{campaign.pk}/results/"
    poll(
        page,
        results,
        lambda: (
            runs.filter(status__in=FINISHED).exists() and runs.exclude(status__in=FINISHED).exists()
        ),
        "a campaign half measured",
        120,
    )
    open_results(page, results)
    crossover = page.locator("#crossover-text").text_content() or ""
    active = runs.exclude(status__in=FINISHED).count()
    if active:  # the last run may have ended meanwhile
        assert "still to come" in crossover, crossover
    assert "Add methods" not in crossover

    # The campaign page follows it to the end.
    campaign_page = f"{live_server.url}/campaigns/{campaign.pk}/"
    poll(
        page,
        campaign_page,
        lambda: not runs.exclude(status__in=FINISHED).exists(),
        "every run ended",
        240,
    )
    assert set(runs.values_list("status", flat=True)) == {Run.Status.SUCCEEDED}
    assert f"Launch {RUNS} runs" in page.locator("main").inner_text()  # no "again": idle

    # At the end: the crossover of direct and copy is drawn, nothing is still to come.
    open_results(page, results)
    crossover = page.locator("#crossover-text").text_content() or ""
    assert "still to come" not in crossover
    assert "Add methods" not in crossover and "add fractions" not in crossover.lower()
    assert page.locator("#chart-fraction .chart-message").count() == 0 or (
        "still to come" not in (page.locator("#chart-fraction .chart-message").text_content() or "")
    )
    watch.assert_clean()
