"""The runs page in Chromium: a header click sorts (and a second one reverses) with the
filters kept, a 200-character campaign name is clipped to one line with the whole name in its
title, a failed run's error expands to its whole message, and the CSV link downloads the rows
listed, in their order."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory

pytestmark = pytest.mark.django_db(transaction=True)

LONG_NAME = "nightly " + "very-long-campaign-name-" * 8  # 200 characters, the longest


def listed(page: Any) -> list[int]:
    return [
        int(i)
        for i in page.eval_on_selector_all("tr[data-run-id]", "r => r.map(x => x.dataset.runId)")
    ]


def test_sorting_clipping_and_the_csv_in_chromium(browser_page: Any, live_server: Any) -> None:
    test_file = TestFileFactory()
    campaign = CampaignFactory(name=LONG_NAME, endpoints=[test_file.endpoint])
    walls = [12.0, 0.4, 75.0, 3.0]
    runs = [
        RunFactory(test_file=test_file, campaign=campaign, status="succeeded", wall_s=wall)
        for wall in walls
    ]
    errors = [{"class": "refused", "message": "connection refused\nby 127.0.0.1:1", "client": 0}]
    failed = RunFactory(test_file=test_file, status="failed", wall_s=0.1, errors=errors)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/?status=succeeded")
    assert listed(page) == [run.pk for run in runs[::-1]]

    page.click("th[data-sort-key='wall_s'] a")
    page.wait_for_url("**ordering=-wall_s**")
    by_wall = sorted(runs, key=lambda run: run.wall_s)
    assert listed(page) == [run.pk for run in by_wall[::-1]]
    assert page.get_attribute("th[data-sort-key='wall_s']", "aria-sort") == "descending"
    page.click("th[data-sort-key='wall_s'] a")
    page.wait_for_url("**ordering=wall_s**")
    assert listed(page) == [run.pk for run in by_wall]
    assert "status=succeeded" in page.url  # the filter is kept

    # The long name: one line, clipped, whole in its title; rows no taller than a short one.
    link = page.locator("a.run-campaign").first
    assert link.get_attribute("title") == LONG_NAME
    box = link.bounding_box()
    line_height = page.locator("th[data-sort-key='created']").bounding_box()["height"]
    assert box["width"] < 300 and box["height"] < line_height
    clipped = link.evaluate("a => a.scrollWidth > a.clientWidth")
    assert clipped
    table = page.locator("table.runs-table").bounding_box()
    row = page.locator("tr[data-run-id]").first.bounding_box()
    assert row["height"] < 2.2 * line_height, (row, table)

    # The CSV link downloads the rows listed, in their order.
    with page.expect_download() as download:
        page.click("#runs-csv")
    text = Path(download.value.path()).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["id"]) for r in rows] == [run.pk for run in by_wall]
    assert rows[0]["campaign"] == LONG_NAME

    # A failed run's error: class and first line, the whole message once expanded.
    page.goto(f"{live_server.url}/runs/?error_class=refused")
    assert listed(page) == [failed.pk]
    summary = page.locator("td.run-error summary")
    assert "refused" in summary.inner_text() and "connection refused" in summary.inner_text()
    assert not page.locator("td.run-error pre").is_visible()
    summary.click()
    assert page.locator("td.run-error pre").inner_text() == "connection refused\nby 127.0.0.1:1"
    watch.assert_clean()
