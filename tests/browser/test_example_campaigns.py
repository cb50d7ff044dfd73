"""The example campaigns of reads `manage.py bootstrap` makes, launched from their pages on the
test lab by a real worker: each results page answers its question with the charts that ask
it, and draws no chart it cannot fill (issue 19, item 6)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.browser.test_results_page import shown
from tests.workers.test_celery import wait_for_final
from webapp.campaigns.models import Campaign, Run
from webapp.demo.examples import EXAMPLES
from webapp.sites.models import VantagePoint

pytestmark = pytest.mark.django_db(transaction=True)

# The charts that answer each example's question (the rest are listed under "Not drawn").
ANSWERING = {
    "Lab example: read directly or copy first, near site": {"fraction", "read-size", "bytes"},
    "Lab example: how many clients the near site serves": {"throughput", "open"},
    "Lab example: sync, async and vector reads, near and far": {"latency", "doors"},
    "Lab example: what read-ahead moves, near site": {"bytes", "latency"},
    "Lab example: XCache cold and warm, and the redirector": {"doors"},
    "Lab example: what TLS and each authentication cost per door": {"doors"},
}
# The questions each example's answer (at the top of its results page) answers: the advice's,
# and "doors" (the open time of each door).
ANSWERS = {
    "Lab example: read directly or copy first, near site": {"crossover"},
    "Lab example: how many clients the near site serves": {"knee"},
    "Lab example: sync, async and vector reads, near and far": {"latency-hiding", "doors"},
    # Without read-ahead, the same reads are the sync, async and vector example's.
    "Lab example: what read-ahead moves, near site": {"read-ahead"},
    "Lab example: XCache cold and warm, and the redirector": {"cache", "redirector", "doors"},
    "Lab example: what TLS and each authentication cost per door": {"doors"},
}
# Every run of every example, on the test profile: generous, they take seconds.
RUNS_TIMEOUT_S = 240


def launch(page: Any, server: str, campaign: Campaign) -> None:
    """From the campaign's page, as a user launches it."""
    page.goto(f"{server}/campaigns/{campaign.pk}/")
    page.get_by_role("button", name=re.compile(r"^Launch \d+ runs?$")).click()
    page.wait_for_url(re.compile(r".*/runs/.*"))


def drawn_points(page: Any, chart: str) -> int:
    """How many values the chart's traces draw (0: an empty frame)."""
    return page.evaluate(
        f"""(document.getElementById('chart-{chart}').data || [])
            .reduce((n, t) => n + Array.from(t.y || []).filter(v => v !== null).length, 0)"""
    )


def charts_on(page: Any) -> set[str]:
    ids = page.locator(".chart-card").evaluate_all("cards => cards.map(c => c.id)")
    return {card_id.removeprefix("card-") for card_id in ids}


@pytest.fixture
def bootstrapped(lab: Any, settings: Any, tmp_path: Path) -> Path:
    """`manage.py bootstrap` on the test lab, as ./bin/run does on a fresh machine: VAR_DIR
    (with the CA folder it makes), returned."""
    settings.FEDPROBE_LAB_DIR = lab.state_dir
    settings.VAR_DIR = tmp_path
    call_command("bootstrap", stdout=io.StringIO())
    return tmp_path


def test_each_example_campaign_answers_its_question_on_the_lab(
    bootstrapped: Path,
    live_server: Any,
    browser_page: Callable[..., Any],
    start_celery_worker: Callable[..., Any],
) -> None:
    # The examples of the other operations: tests/webapp/demo/test_example_operations.py.
    reads = [example for example in EXAMPLES if example.operations == ["read"]]
    campaigns = [Campaign.objects.get(name=example.name) for example in reads]
    assert set(ANSWERING) == {c.name for c in campaigns}
    # The examples measure from "local". This test's worker measures them from a vantage point
    # of its own, so that no other worker of the session takes their runs, verifying TLS
    # servers against the CA folder bootstrap made (as bin/run's worker does).
    vantage_point = VantagePoint.objects.create(name="examples")
    for campaign in campaigns:
        campaign.vantage_points.set([vantage_point])
    worker = start_celery_worker(
        "examples",
        env={
            "FEDPROBE_VAR_DIR": str(bootstrapped),
            "FEDPROBE_CA_DIR": str(bootstrapped / "ca"),
        },
    )
    page, watch = browser_page("operator")
    for campaign in campaigns:
        launch(page, live_server.url, campaign)
    runs = list(Run.objects.filter(campaign__in=campaigns))
    assert len(runs) == sum(c.matrix_size() for c in campaigns)
    runs = wait_for_final(runs, worker, timeout_s=RUNS_TIMEOUT_S)
    assert {r.status for r in runs} == {Run.Status.SUCCEEDED}, [r.errors for r in runs]
    took_s = (max(r.finished_at for r in runs) - min(r.created_at for r in runs)).total_seconds()
    print(f"{len(runs)} example runs measured in {took_s:.1f} s")  # pytest -s shows it
    for campaign in campaigns:
        mine = [r for r in runs if r.campaign_id == campaign.pk]
        busy_s = sum((r.finished_at - r.started_at).total_seconds() for r in mine)
        print(f"  {campaign.name}: {len(mine)} runs, {busy_s:.1f} s")

    for campaign in campaigns:
        page.goto(f"{live_server.url}/campaigns/{campaign.pk}/results/")
        page.wait_for_selector("#answer[data-loaded=answer]")
        lines = page.locator("#answer .answer-line")
        answered = lines.evaluate_all(
            "items => items.map(i => [i.dataset.question, i.dataset.verdict, i.innerText])"
        )
        print(campaign.name, *answered, sep="\n  ")  # pytest -s shows the answers
        assert {question for question, _, _ in answered} == ANSWERS[campaign.name]
        assert all(verdict != "too-thin" for _, verdict, _ in answered), answered
        drawn = charts_on(page)
        assert drawn == ANSWERING[campaign.name] | {"errors"}, campaign.name
        for chart in drawn - {"errors"}:
            shown(page, chart)
            assert page.locator(f"#chart-{chart} .chart-message").count() == 0, (
                campaign.name,
                chart,
                page.locator(f"#chart-{chart}").text_content(),
            )
            assert drawn_points(page, chart) > 0, (campaign.name, chart)
        shown(page, "errors")
        assert "nothing to count" in (page.locator("#chart-errors").text_content() or "")
        not_drawn = page.locator("#not-asked li").evaluate_all(
            "items => items.map(i => i.dataset.chart)"
        )
        assert set(not_drawn) == set(CHARTS) - drawn, campaign.name
    watch.assert_clean()


CHARTS = ("fraction", "read-size", "throughput", "open", "doors", "bytes", "latency")
