"""The campaign results page in Chromium, on runs measured from the lab in this process."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import run_cancel, run_execute
from webapp.dashboards.selectors.results import campaign_results
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint, Site
from workers.lab.files import MiB

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "<img src=x onerror=alert(1)>"
FRACTIONS = [0.25, 0.5, 1.0]
CLIENTS = [1, 2]
READ_SIZE = 256 * 1024


def lab_campaign(lab: Any) -> Campaign:
    """direct + copy x 3 fractions x 1-2 clients on the near site's xrootd, reading 1 MiB;
    a few random and async reads on near and far (paper 002); one cancelled run."""
    lab_register(lab=lab)
    near, far = (Endpoint.objects.get(name=f"{n}-root") for n in ("near", "far"))
    files = {e: e.files.get(size=1 * MiB) for e in (near, far)}
    campaign = CampaignFactory(
        name="lab direct vs copy",
        endpoints=[near, far],
        methods=["direct", "copy"],
        patterns=["sequential", "random", "async"],
        read_sizes=[READ_SIZE],
        fractions=FRACTIONS,
        clients=CLIENTS,
    )
    campaign.test_files.set(files.values())
    cells = [("direct", "sequential", f, c, near) for f in FRACTIONS for c in CLIENTS]
    cells += [("copy", "sequential", f, c, near) for f in FRACTIONS for c in CLIENTS]
    cells += [("direct", p, 0.5, 1, e) for p in ("random", "async") for e in (near, far)]
    cells += [("direct", "sequential", 0.5, 1, far)]
    for method, pattern, fraction, clients, endpoint in cells:
        run = RunFactory(
            campaign=campaign,
            test_file=files[endpoint],
            method=method,
            pattern=pattern,
            read_size=READ_SIZE,
            fraction=fraction,
            clients=clients,
        )
        run_execute(run_id=run.pk, worker="browser-test")
    run_cancel(run=RunFactory(campaign=campaign, test_file=files[near], method="copy"))
    assert not Run.objects.filter(campaign=campaign, status=Run.Status.FAILED).exists()
    return campaign


def make_hostile(campaign: Campaign) -> Endpoint:
    """Give the near endpoint and its site script-shaped names (the endpoint's bypasses the
    form's validator, as a row written by other means would)."""
    near = Endpoint.objects.get(name="near-root")
    Site.objects.filter(pk=near.site_id).update(name=f"site {HOSTILE}")
    Endpoint.objects.filter(pk=near.pk).update(name=f"near {HOSTILE}")
    return near


CHARTS = ("fraction", "read-size", "throughput", "open", "doors", "bytes", "latency", "errors")


def shown(page: Any, chart: str) -> None:
    """Bring a chart on screen (charts are drawn as they come near it) and wait for it."""
    page.locator(f"#card-{chart}").scroll_into_view_if_needed()
    page.wait_for_selector(f"#chart-{chart}[data-drawn-for]")


def open_results(page: Any, url: str) -> None:
    """Open the page and have every chart it has drawn (scrolling down through them, then up):
    it has none of those whose question the campaign does not ask."""
    page.goto(url)
    for chart in CHARTS:
        if page.locator(f"#card-{chart}").count():
            shown(page, chart)
    page.evaluate("window.scrollTo(0, 0)")


def traces(page: Any, chart: str) -> list[dict[str, Any]]:
    return page.evaluate(
        f"""document.getElementById('chart-{chart}').data
            .map(t => ({{name: t.name, x: Array.from(t.x), y: Array.from(t.y)}}))"""
    )


def drawn_points(page: Any, chart: str) -> set[tuple[str, float, float]]:
    return {
        (trace["name"], x, round(y, 6))
        for trace in traces(page, chart)
        for x, y in zip(trace["x"], trace["y"], strict=True)
    }


def expected_points(campaign: Campaign, near: Endpoint, clients: int) -> set[Any]:
    cells = campaign_results(campaign=campaign).cells
    return {
        (c["method"], c["fraction"], round(c["wall_s"], 6))
        for c in cells
        if c["endpoint"] == near.pk and c["clients"] == clients and c["pattern"] == "sequential"
    }


def download(page: Any, chart: str, kind: str) -> str:
    with page.expect_download() as caught:
        page.locator(f"#card-{chart} [data-download={kind}]").click()
    path = caught.value.path()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_results_page_draws_the_lab_campaign(
    browser_page: Callable[..., Any],
    live_server: Any,
    lab: Any,
    screenshot: Callable[[Any, str], Any],
) -> None:
    campaign = lab_campaign(lab)
    page, watch = browser_page("viewer")
    url = f"{live_server.url}/campaigns/{campaign.pk}/results/"

    # Without a query, the controls choose the values most parameter sets were measured at.
    open_results(page, url)
    chosen = {n: page.locator(f"#control-{n}").input_value() for n in ("pattern", "clients")}
    assert chosen == {"pattern": "sequential", "clients": "1"}
    screenshot(page, "campaign-results")

    near = make_hostile(campaign)
    open_results(page, f"{url}?endpoint={near.pk}&pattern=sequential&fraction=0.5&clients=1")

    # One line per method, at the measured fractions, with the selector's medians.
    assert {t["name"] for t in traces(page, "fraction")} == {"direct", "copy"}
    assert all(t["x"] == FRACTIONS for t in traces(page, "fraction"))
    assert drawn_points(page, "fraction") == expected_points(campaign, near, clients=1)
    # Copies have no open time of the endpoint (their tool opens it out of sight): no line
    # at 0 s beside direct's.
    assert [t["name"] for t in traces(page, "open") if t["x"]] == ["direct"]

    # The crossover sentence is the selector's, names and all, as text.
    (crossover,) = [
        c
        for c in campaign_results(campaign=campaign).crossovers
        if c.key["endpoint"] == near.pk and c.key["clients"] == 1
    ]
    sentence = page.locator("#crossover-text").text_content()
    assert sentence == crossover.text and f"near {HOSTILE}" in sentence
    marked = page.evaluate("document.getElementById('chart-fraction').layout.shapes || []")
    assert len(marked) == (0 if crossover.fraction is None else 1)

    # Paper 002's chart has bars per access pattern on both endpoints.
    latency = traces(page, "latency")
    assert {t["name"] for t in latency} == {
        "sequential (sync)",
        "random (sync)",
        "async, 64 outstanding",
    }
    assert all(len(t["x"]) == 2 for t in latency)

    # A control redraws the chart and goes into the address.
    before = drawn_points(page, "fraction")
    page.select_option("#control-clients", "2")
    page.wait_for_url("**clients=2**")
    page.wait_for_selector("#chart-fraction[data-drawn-for*='clients=2']")
    assert drawn_points(page, "fraction") == expected_points(campaign, near, clients=2) != before

    # The CSV download is the points drawn.
    rows = list(csv.DictReader(io.StringIO(download(page, "fraction", "csv"))))
    assert {(r["method"], float(r["fraction"]), round(float(r["wall_s"]), 6)) for r in rows} == (
        drawn_points(page, "fraction")
    )
    assert {r["clients"] for r in rows} == {"2"} and {r["endpoint"] for r in rows} == {
        f"near {HOSTILE}"
    }

    # The errors chart counts the cancelled run.
    assert sum(sum(t["x"]) for t in traces(page, "errors")) == 1

    # The hostile names stay text: in the title, tick labels and hovers; no element, no dialog.
    title = page.locator("#chart-fraction .gtitle").text_content()
    assert f"near {HOSTILE}" in title and f"site {HOSTILE}" in title
    ticks = page.locator("#chart-errors .ytick text").all_text_contents()
    assert f"near {HOSTILE} · copy" in ticks
    point = page.locator("#chart-fraction .scatterlayer .trace .points path").first
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = page.locator("#chart-fraction .hoverlayer").text_content()
    assert f"near {HOSTILE}" in hover
    assert page.locator("img[src=x]").count() == 0

    # A chart whose question the campaign does not ask (it reads one read size) is not
    # drawn, not even as an empty frame: one line under "Not drawn" says why and what to add.
    assert page.locator("#card-read-size").count() == 0
    reason = page.locator("#not-asked li[data-chart=read-size]").text_content() or ""
    assert "Time to read vs read size" in reason and "add read sizes" in reason

    # The address is a permalink of the controls.
    open_results(page, f"{url}?endpoint={near.pk}&pattern=sequential&fraction=1&clients=2")
    assert page.locator("#control-clients").input_value() == "2"
    assert page.locator("#control-fraction").input_value() == "1"
    watch.assert_clean()


def test_a_campaign_of_each_family_draws_ipv4_and_ipv6_apart(
    browser_page: Callable[..., Any], live_server: Any
) -> None:
    """A campaign's each: its runs pinned to IPv4 and to IPv6 are cells of their own, chosen
    by an "Address family" control like any parameter that varies, never one line."""
    campaign = CampaignFactory(
        name="both families", methods=["direct", "copy"], fractions=[0.5, 1.0]
    )
    campaign.address_family = "each"
    campaign.save()
    test_file = TestFileFactory(size=MiB)
    campaign.endpoints.set([test_file.endpoint])
    walls = {"4": 1.0, "6": 3.0}
    for family, wall_s in walls.items():
        for method in ("direct", "copy"):
            for fraction in (0.5, 1.0):
                RunFactory(
                    campaign=campaign,
                    test_file=test_file,
                    method=method,
                    fraction=fraction,
                    address_family=family,
                    status=Run.Status.SUCCEEDED,
                    wall_s=wall_s * fraction,
                    open_s=0.01,
                    throughput_mbps=10.0,
                    bytes_read=MiB,
                )
    page, watch = browser_page("viewer")
    url = f"{live_server.url}/campaigns/{campaign.pk}/results/?address_family=6"
    page.goto(url)
    shown(page, "fraction")
    assert page.locator("#control-address_family option").all_text_contents() == ["IPv4", "IPv6"]
    assert page.locator("#control-address_family").input_value() == "6"
    assert {round(y, 6) for t in traces(page, "fraction") for y in t["y"]} == {1.5, 3.0}
    page.select_option("#control-address_family", "4")
    page.wait_for_url("**address_family=4**")
    page.wait_for_selector("#chart-fraction[data-drawn-for*='address_family=4']")
    assert {round(y, 6) for t in traces(page, "fraction") for y in t["y"]} == {0.5, 1.0}
    assert watch.errors == []
