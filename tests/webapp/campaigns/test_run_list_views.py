"""The runs page for triage: each run's error class and first line (the whole message on
hover and on expand), wall time, sortable headers that keep the filters, an ordering the page
does not offer ignored with a message, the error class filter, the CSV link of what is listed,
and long names clipped with the whole name in a title."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]


@pytest.fixture
def viewer(client: Client) -> Client:
    user = User.objects.create_user("viewer")
    user_set_role(user=user, role="viewer")
    client.force_login(user)
    return client


def listed_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-run-id="(\d+)"', html)]


@pytest.fixture
def runs() -> dict[str, Run]:
    test_file = TestFileFactory()
    message = "open failed: [ERROR] Server responded with an error: [3010]\nsecond line of it"
    errors = [{"class": "auth", "message": message, "client": 0}]
    return {
        "short": RunFactory(test_file=test_file, status="succeeded", wall_s=1.5),
        "long": RunFactory(test_file=test_file, status="succeeded", wall_s=75.0),
        "failed": RunFactory(test_file=test_file, status="failed", wall_s=0.25, errors=errors),
    }


def page(client: Client, query: dict[str, Any] | None = None) -> str:
    answer = client.get("/runs/", query or {})
    assert answer.status_code == 200
    return answer.content.decode()


def test_a_failed_run_shows_its_error_class_and_first_line_with_the_whole_message(
    viewer: Client, runs: dict[str, Run]
) -> None:
    html = page(viewer)
    row = re.search(rf'<tr data-run-id="{runs["failed"].pk}".*?</tr>', html, re.DOTALL)
    assert row
    cells = row.group(0)
    assert ">auth</span>" in cells
    first = "open failed: [ERROR] Server responded with an error: [3010]"
    assert f'<span class="error-line">{first}</span>' in unescape(cells)
    assert 'title="open failed: [ERROR] Server responded with an error: [3010]\nsecond line' in (
        unescape(cells)
    )
    assert "second line of it</pre>" in cells and "<details>" in cells
    assert "250" in cells  # wall time 0.25 s, shown in ms


def test_the_wall_time_column_shows_each_run_s_wall_time(
    viewer: Client, runs: dict[str, Run]
) -> None:
    html = page(viewer)
    assert "75.00 s" in html and "1.50 s" in html
    assert 'data-sort-key="wall_s"' in html


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        ("-wall_s", ["long", "short", "failed"]),
        ("wall_s", ["failed", "short", "long"]),
        ("status", ["failed", "short", "long"]),
        ("", ["failed", "long", "short"]),
    ],
)
def test_the_page_lists_runs_in_the_ordering_asked(
    viewer: Client, runs: dict[str, Run], ordering: str, expected: list[str]
) -> None:
    html = page(viewer, {"ordering": ordering} if ordering else {})
    assert listed_ids(html) == [runs[name].pk for name in expected]


def test_sorted_headers_link_the_other_direction_and_keep_the_filters(
    viewer: Client, runs: dict[str, Run]
) -> None:
    html = unescape(page(viewer, {"ordering": "-wall_s", "status": "succeeded", "page": "1"}))
    wall = re.search(r'<th [^>]*data-sort-key="wall_s"[^>]*>.*?</th>', html, re.DOTALL)
    assert wall and 'aria-sort="descending"' in wall.group(0)
    href = re.search(r'href="\?([^"]*)"', wall.group(0))
    assert href and sorted(href.group(1).split("&")) == ["ordering=wall_s", "status=succeeded"]
    created = re.search(r'<th [^>]*data-sort-key="created"[^>]*>.*?</th>', html, re.DOTALL)
    assert created and "aria-sort" not in created.group(0)
    # The filter form keeps the order when the filters change.
    assert '<input type="hidden" name="ordering" value="-wall_s">' in html


def test_an_ordering_the_page_does_not_offer_is_ignored_with_a_message(
    viewer: Client, runs: dict[str, Run]
) -> None:
    html = page(viewer, {"ordering": "-endpoint", "status": "succeeded"})
    assert "cannot be sorted by “-endpoint”" in unescape(html)
    # The other filters still apply, in the default order (newest first).
    assert listed_ids(html) == [runs["long"].pk, runs["short"].pk]
    assert "-endpoint" not in html.split('id="runs-csv"')[1].split(">")[0]


def test_the_error_class_filter(viewer: Client, runs: dict[str, Run]) -> None:
    assert listed_ids(page(viewer, {"error_class": "auth"})) == [runs["failed"].pk]
    assert listed_ids(page(viewer, {"error_class": "timeout"})) == []
    assert 'name="error_class"' in page(viewer)


def test_the_csv_link_carries_the_filters_and_order_of_the_page(
    viewer: Client, runs: dict[str, Run]
) -> None:
    html = unescape(page(viewer, {"ordering": "-wall_s", "status": "succeeded", "page": "1"}))
    link = re.search(r'<a href="([^"]+)" id="runs-csv"', html)
    assert link
    path, _, query = link.group(1).partition("?")
    assert path == "/api/v1/runs/csv/"
    assert sorted(query.split("&")) == ["ordering=-wall_s", "status=succeeded"]
    answer = viewer.get(link.group(1))
    text = b"".join(answer.streaming_content).decode()
    assert [int(line.split(",")[0]) for line in text.splitlines()[1:]] == [
        runs["long"].pk,
        runs["short"].pk,
    ]


def test_long_campaign_and_endpoint_names_are_clipped_with_the_whole_name_in_a_title(
    viewer: Client,
) -> None:
    name = "nightly " + "very-long-campaign-name-" * 8  # 200 characters: the longest
    test_file = TestFileFactory()
    campaign = CampaignFactory(name=name, endpoints=[test_file.endpoint])
    RunFactory(test_file=test_file, campaign=campaign)
    html = page(viewer)
    assert re.search(rf'<a class="clip run-campaign" href="[^"]+" title="{re.escape(name)}">', html)
    assert 'css/runs.css"' in html
    detail = viewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert re.search(rf'class="clip run-campaign" href="[^"]+" title="{re.escape(name)}">', detail)


def test_the_filters_are_labelled_in_words(viewer: Client) -> None:
    """django-filter's own labels were "[invalid name]" for the error class and "Created at
    is greater than or equal to" for the range."""
    labels = [
        unescape(re.sub(r"<[^>]+>", "", label)).strip()
        for label in re.findall(r"<label[^>]*>(.*?)</label>", page(viewer), re.S)
    ]
    for label in (
        "First error:",
        "Created from (UTC):",
        "Created before (UTC):",
        "Vantage point:",
        "Read size (bytes):",
    ):
        assert label in labels
    assert not [label for label in labels if "invalid" in label or " is " in label]
