"""The results pages of the example campaigns beyond reads (a write, a metadata storm, a
third-party copy, a recorded job's replay), measured on the test lab by a real worker: each
draws its operation's chart from the cells' medians, one trace per endpoint or operation kind
as the operator compares them, no read chart, and says so in one line (issue 20, item 5)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.browser.test_results_page import shown
from tests.workers.test_celery import wait_for_final
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.dashboards.selectors.results import campaign_results
from webapp.dashboards.selectors.results_guidance import CHART_TITLES
from webapp.demo.examples import EXAMPLES
from webapp.sites.models import VantagePoint

pytestmark = pytest.mark.django_db(transaction=True)

# Per example: its charts (besides errors), and per chart the metric it draws.
CHARTS = {
    "Lab example: how fast the near site takes writes, by door": {"write": "throughput_mbps"},
    "Lab example: a metadata storm at the near site": {"metadata": "ops_per_s"},
    "Lab example: third-party copy near to far, pull and push": {
        "tpc-rate": "tpc_rate_mbps",
        "tpc-start": "tpc_start_s",
    },
    "Lab example: a recorded job replayed near and far": {"replay": "wall_s"},
}
# Every run of the four, on the test profile: generous, they take seconds.
RUNS_TIMEOUT_S = 240


@pytest.fixture
def bootstrapped(lab: Any, settings: Any, tmp_path: Path) -> Path:
    """`manage.py bootstrap` on the test lab (as ./bin/run does): VAR_DIR, returned."""
    settings.FEDPROBE_LAB_DIR = lab.state_dir
    settings.VAR_DIR = tmp_path
    call_command("bootstrap", stdout=io.StringIO())
    return tmp_path


def traces(page: Any, chart: str) -> list[dict[str, Any]]:
    return page.evaluate(
        f"""document.getElementById('chart-{chart}').data
            .map(t => ({{name: t.name, x: Array.from(t.x), y: Array.from(t.y)}}))"""
    )


def expected_traces(campaign: Campaign, chart: str, metric: str) -> dict[str, set[Any]]:
    """What the chart should draw from the selector's cells: per trace name, its points."""
    names = {e.pk: e.name for e in campaign.endpoints.all()}
    drawn: dict[str, set[Any]] = {}
    for cell in campaign_results(campaign=campaign).cells:
        if cell[metric] is None:
            continue
        if chart == "write":
            name, point = names[cell["endpoint"]], (cell["clients"], cell[metric])
        elif chart == "replay":
            clients = cell["clients"]
            name = f"{clients} client{'s' if clients != 1 else ''}"
            point = (names[cell["endpoint"]], cell[metric])
        else:
            name = f"{cell['operation']} · {names[cell['endpoint']]}"
            point = (cell["clients"], cell[metric])
        drawn.setdefault(name, set()).add(point)
    return drawn


def test_the_operation_examples_results_pages_draw_their_operations(
    bootstrapped: Path,
    live_server: Any,
    browser_page: Callable[..., Any],
    start_celery_worker: Callable[..., Any],
    screenshot: Callable[[Any, str], Path],
) -> None:
    examples = [example for example in EXAMPLES if example.operations != ["read"]]
    campaigns = [Campaign.objects.get(name=example.name) for example in examples]
    assert {c.name for c in campaigns} == set(CHARTS)
    # From a vantage point of the test's own, so that no other worker of the session takes
    # the runs, verifying TLS servers against the CA folder bootstrap made (as bin/run).
    vantage_point = VantagePoint.objects.create(name="operation-results")
    for campaign in campaigns:
        campaign.vantage_points.set([vantage_point])
    worker = start_celery_worker(
        "operation-results",
        env={
            "FEDPROBE_VAR_DIR": str(bootstrapped),
            "FEDPROBE_CA_DIR": str(bootstrapped / "ca"),
        },
    )
    launched = [run for c in campaigns for run in campaign_launch(campaign=c, trigger="manual")]
    runs = wait_for_final(launched, worker, timeout_s=RUNS_TIMEOUT_S)
    assert {r.status for r in runs} == {Run.Status.SUCCEEDED}, [r.errors for r in runs]

    page, watch = browser_page("viewer")
    for campaign in campaigns:
        page.goto(f"{live_server.url}/campaigns/{campaign.pk}/results/")
        cards = page.locator(".chart-card").evaluate_all("cards => cards.map(c => c.id)")
        assert {c.removeprefix("card-") for c in cards} == {*CHARTS[campaign.name], "errors"}
        # No endpoint or operation control: each of these charts draws them all.
        assert page.locator("#control-endpoint, #control-operation").count() == 0
        for chart, metric in CHARTS[campaign.name].items():
            shown(page, chart)
            drawn = {t["name"]: set(zip(t["x"], t["y"], strict=True)) for t in traces(page, chart)}
            print(campaign.name, chart, drawn)  # pytest -s shows them
            assert drawn == expected_traces(campaign, chart, metric), (campaign.name, chart)
            assert all(len(points) >= 1 for points in drawn.values())
        shown(page, "errors")
        assert "nothing to count" in (page.locator("#chart-errors").text_content() or "")
        (line,) = page.locator("#not-asked li").all()
        assert (line.get_attribute("data-chart") or "").split() == list(CHART_TITLES)
        assert "not reads: the page draws what it measures in" in line.inner_text()
        screenshot(page, f"campaign-results-{'-'.join(campaign.operations)}")
    watch.assert_clean()
