"""The campaign results page's texts and axes in Chromium, on known runs: log axes labelled so
that no two ticks read alike, the latency-hiding chart's endpoint order and the sentence that
says it, the advice mid-campaign, captions citing the papers by authors and year, and the
crossover mark clear of the title."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.test_results_page import open_results, shown
from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory
from webapp.campaigns.models import Campaign, Run
from webapp.dashboards.selectors.results import campaign_results
from webapp.sites.models import TestFile

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = [4096, 65536, 1048576]
TICK = re.compile(r"^\d+(\.\d+)? (ms|s)$")


def measured(campaign: Campaign, test_file: TestFile, rtt_ms: float, **fields: Any) -> Run:
    values: dict[str, Any] = {
        "method": "direct",
        "pattern": "random",
        "read_size": 65536,
        "fraction": 0.5,
        "clients": 1,
        "open_s": 0.01,
        "throughput_mbps": 10.0,
        "bytes_requested": 1000,
        "bytes_wire": 1000,
        "result": {"preflight_rtt_ms": rtt_ms},
    }
    values.update(fields)
    return RunFactory(campaign=campaign, test_file=test_file, status=Run.Status.SUCCEEDED, **values)


def finished_campaign() -> tuple[Campaign, TestFile, TestFile]:
    """near (2 ms away) and far (10 ms); near's copies wait for the whole file before their
    first byte, and near has more copies than direct reads, so over all its runs near's
    first byte comes later than far's."""
    near = TestFileFactory(endpoint__name="near-root")
    far = TestFileFactory(endpoint__name="far-root")
    campaign = CampaignFactory(
        name="times over decades",
        endpoints=[near.endpoint, far.endpoint],
        methods=["direct", "copy"],
        patterns=["random", "async"],
        read_sizes=SIZES,
        fractions=[0.5, 1.0],
        clients=[1],
    )
    direct_walls = {4096: 20.0, 65536: 1.0, 1048576: 0.2}
    copy_walls = {4096: 0.5, 65536: 2.0, 1048576: 0.45}
    for size in SIZES:
        measured(campaign, near, 2.1, read_size=size, wall_s=direct_walls[size], ttfb_s=0.004)
        for fraction in (0.5, 1.0):
            wall_s = copy_walls[size]
            copy = {"method": "copy", "read_size": size, "fraction": fraction, "ttfb_s": 0.9}
            measured(campaign, near, 2.1, wall_s=wall_s, **copy)
    measured(campaign, near, 2.1, fraction=1.0, wall_s=4.0, ttfb_s=0.004)
    measured(campaign, near, 2.1, pattern="async", wall_s=0.3, ttfb_s=0.004)
    measured(campaign, near, 2.1, pattern="async", method="copy", wall_s=2.0, ttfb_s=0.9)
    measured(campaign, far, 10.4, wall_s=3.0, ttfb_s=0.02)
    measured(campaign, far, 10.4, pattern="async", wall_s=0.6, ttfb_s=0.02)
    return campaign, near, far


def tick_labels(page: Any, chart: str, axis: str) -> list[str]:
    return page.locator(f"#chart-{chart} .{axis}tick text").all_text_contents()


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_results_page_axes_order_and_captions(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    campaign, near, far = finished_campaign()
    page, watch = browser_page("viewer")
    query = f"endpoint={near.endpoint_id}&method=direct&pattern=random&read_size=65536&fraction=0.5"
    open_results(page, f"{live_server.url}/campaigns/{campaign.pk}/results/?{query}")

    # Log axes of seconds: every tick labelled in full, with its unit, none twice.
    for chart in ("read-size", "latency"):
        labels = tick_labels(page, chart, "y")
        assert len(labels) >= 3, (chart, labels)
        assert all(TICK.match(label) for label in labels), (chart, labels)
        assert len(set(labels)) == len(labels), (chart, labels)
    assert {"200 ms", "2 s", "20 s"} <= set(tick_labels(page, "read-size", "y"))

    # The latency-hiding chart: near before far (their round-trip times), and it says so.
    (order,) = campaign_results(campaign=campaign).latency_order
    assert order["endpoints"] == [near.endpoint_id, far.endpoint_id]
    shown(page, "latency")
    drawn_order = page.evaluate(
        "document.getElementById('chart-latency').layout.xaxis.categoryarray"
    )
    assert drawn_order == ["near-root", "far-root"]
    note = page.locator("#card-latency [data-role=note]").text_content()
    assert note == order["text"] and "near-root 2.1 ms, far-root 10.4 ms" in note
    caption = page.locator("#card-latency .chart-note").first.text_content()
    assert "local, near and far" not in caption

    # Captions cite the papers by authors and year, not by their file names.
    captions = " ".join(page.locator(".chart-card .chart-note").all_text_contents())
    assert "Paper 0" not in captions and "paper 0" not in captions
    for cited in (
        "de Witt & Lahiff (2015)",
        "Baak & Schott (2009)",
        "Furano & Hanushevsky (2008)",
    ):
        assert cited in captions
    # Cowan et al.'s charts (against client counts) are not drawn: one client count here.
    assert page.locator("#card-throughput, #card-open").count() == 0
    assert page.locator("#not-asked li[data-chart=throughput]").count() == 1

    # The crossover mark sits below the chart's title (its subtitle included), whatever the
    # title's width and wherever the crossover falls: inside the plot.
    shown(page, "fraction")
    mark = page.locator("#chart-fraction .annotation").first.bounding_box()
    title = page.locator("#chart-fraction .gtitle").bounding_box()
    assert "crossover" in page.locator("#chart-fraction .annotation").first.text_content()
    plot = page.locator("#chart-fraction .draglayer .nsewdrag").first.bounding_box()
    assert mark["y"] >= title["y"] + title["height"], (mark, title)
    assert mark["y"] >= plot["y"] and not overlap(mark, title), (mark, plot)
    watch.assert_clean()


def test_mid_campaign_the_page_says_runs_are_still_to_come(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    """A direct+copy, random+sequential campaign with one run measured and three queued: no
    advice to add methods or patterns the campaign already asks for."""
    test_file = TestFileFactory(endpoint__name="near-root")
    campaign = CampaignFactory(
        endpoints=[test_file.endpoint],
        methods=["direct", "copy"],
        patterns=["random", "sequential"],
        fractions=[0.5, 1.0],
        clients=[1],
    )
    measured(campaign, test_file, 2.0, wall_s=1.0, ttfb_s=0.01)
    for fields in ({"method": "copy"}, {"pattern": "sequential"}, {"fraction": 1.0}):
        queued = {"clients": 1, "fraction": 0.5, **fields}
        RunFactory(campaign=campaign, test_file=test_file, **queued)
    page, watch = browser_page("viewer")
    open_results(page, f"{live_server.url}/campaigns/{campaign.pk}/results/")

    crossover = page.locator("#crossover-text").text_content()
    fraction = page.locator("#chart-fraction .chart-message").text_content()
    latency = page.locator("#chart-latency .chart-message").text_content()
    for said in (crossover, fraction, latency):
        assert said.startswith("3 runs still to come"), said
    assert "Add methods" not in crossover and "one access pattern" not in latency
    assert page.locator("#card-latency [data-role=note]").text_content() == ""
    watch.assert_clean()


def test_a_campaign_of_reads_and_a_storm_draws_each_operation_on_its_own_chart(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    """Reads and a metadata storm (stat, open, list) in one campaign vary the operation: the
    read charts draw the reads only, the storm's chart draws its operations per second, one
    line per operation kind, and no control chooses an operation (a former permalink naming
    one still opens the page)."""
    test_file = TestFileFactory(endpoint__name="near-root")
    campaign = CampaignFactory(
        name="storm",
        endpoints=[test_file.endpoint],
        operations=["read", "stat", "open", "list"],
        clients=[1, 4],
    )
    for clients in (1, 4):
        measured(campaign, test_file, 2.1, clients=clients, throughput_mbps=10.0 * clients)
        for rate, operation in ((100, "stat"), (50, "open"), (20, "list")):
            result = {"preflight_rtt_ms": 2.1, "ops_per_s": rate * clients}
            measured(campaign, test_file, 2.1, operation=operation, clients=clients, result=result)
    page, watch = browser_page("viewer")
    open_results(page, f"{live_server.url}/campaigns/{campaign.pk}/results/?operation=open")
    assert page.locator("#control-operation").count() == 0
    shown(page, "throughput")
    reads = page.evaluate(
        """document.getElementById('chart-throughput').data
            .map(t => [t.name, Array.from(t.x), Array.from(t.y)])"""
    )
    assert ["direct, aggregate", [1, 4], [10.0, 40.0]] in reads
    shown(page, "metadata")
    storms = page.evaluate(
        """document.getElementById('chart-metadata').data
            .map(t => [t.name, Array.from(t.x), Array.from(t.y)])"""
    )
    assert sorted(storms) == [
        ["list · near-root", [1, 4], [20.0, 80.0]],
        ["open · near-root", [1, 4], [50.0, 200.0]],
        ["stat · near-root", [1, 4], [100.0, 400.0]],
    ]
    watch.assert_clean()
