"""The run detail page in Chromium: a finished lab run's timeline (one row per client), its
latency histograms and data servers; a control that reorders the timeline and keeps it in
the URL; downloads equal to what is drawn; a running run drawn live without a reload; hostile
names and error messages inert."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.webapp.factories import CampaignFactory
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.sites.models import Endpoint
from webapp.sites.services import lab_register

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 6


def measured_run(lab: Any, clients: int = CLIENTS) -> Run:
    """A random-read run through the lab's redirector, measured in this process."""
    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name="lab-redirector-root")
    campaign = CampaignFactory(
        name="redirected reads", endpoints=[endpoint], clients=[clients], read_sizes=[16384],
        fractions=[0.5],
    )  # fmt: skip
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.errors
    return run


def chart_data(page: Any, selector: str) -> list[dict[str, Any]]:
    """The traces Plotly drew in the element (their data, as plain JSON)."""
    return page.evaluate(  # type: ignore[no-any-return]
        "(sel) => JSON.parse(JSON.stringify(document.querySelector(sel).data))", selector
    )


def download(page: Any, card: str, kind: str) -> str:
    with page.expect_download() as caught:
        page.click(f"#{card} [data-download={kind}]")
    return Path(caught.value.path()).read_text()


def test_a_finished_run_shows_its_timeline_histograms_and_servers(
    lab: Any,
    live_server: Any,
    browser_page: Callable[..., Any],
    screenshot: Callable[[Any, str], Path],
) -> None:
    run = measured_run(lab)
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#timeline-chart .main-svg")
    traces = chart_data(page, "#timeline-chart")
    bars = {t["name"]: t for t in traces if t["type"] == "bar"}
    assert list(bars) == ["open", "read", "close"]
    for trace in bars.values():
        assert sorted(trace["y"]) == sorted(f"client {c}" for c in range(CLIENTS))
    firsts = [t for t in traces if t["name"] == "first byte"]
    assert len(firsts[0]["x"]) == CLIENTS
    kinds = page.eval_on_selector_all(
        "#latency-charts [data-kind]", "charts => charts.map(c => c.dataset.kind)"
    )
    assert kinds == ["read", "close", "open"]
    (read,) = chart_data(page, "#latency-charts [data-kind=read]")
    assert read["x"] and max(read["y"]) > 0
    ok, failed = chart_data(page, "#served-chart")
    assert ok["y"] == run.served_by  # the redirector's data servers, not the redirector
    assert sum(ok["x"]) == CLIENTS and sum(failed["x"]) == 0
    screenshot(page, "run-detail")
    watch.assert_clean()


def test_downloads_are_the_drawn_rows_and_the_order_is_a_permalink(
    lab: Any, live_server: Any, browser_page: Callable[..., Any]
) -> None:
    run = measured_run(lab, clients=4)
    page, watch = browser_page("viewer")
    statuses: list[str] = []
    page.on("request", lambda request: "/runs/status/" in request.url and statuses.append(request.url))
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#served-chart .main-svg")
    api = page.evaluate(f"fetch('/api/v1/runs/{run.pk}/').then(r => r.json())")

    rows = list(csv.DictReader(io.StringIO(download(page, "timeline-card", "csv"))))
    assert json.loads(download(page, "timeline-card", "json")) == [
        {k: _typed(v) for k, v in row.items()} for row in rows
    ]
    drawn = chart_data(page, "#timeline-chart")
    for trace in drawn:
        event = trace["name"]
        listed = [r for r in rows if r["event"] == event]
        starts = trace["base"] if trace["type"] == "bar" else trace["x"]
        assert [(f"client {r['client']}", float(r["start_s"])) for r in listed] == list(
            zip(trace["y"], starts, strict=True)
        )
    phases = {
        (str(c["client"]), p["phase"], p["start_s"], p["end_s"])
        for c in api["timeline"]
        for p in c["phases"]
    }
    assert {
        (r["client"], r["event"], float(r["start_s"]), float(r["end_s"]))
        for r in rows
        if r["event"] not in ("first byte", "error")
    } == phases

    latency = list(csv.DictReader(io.StringIO(download(page, "latency-card", "csv"))))
    buckets = [(r["kind"], float(r["lower_us"]), int(r["count"])) for r in latency if r["series"] == "bucket"]
    assert buckets == [
        (kind, b["lower_us"], b["count"]) for kind, h in api["latency_hist"].items() for b in h["buckets"]
    ]
    assert {(r["kind"], r["series"], float(r["lower_us"])) for r in latency if r["series"] != "bucket"} == {
        (kind, p, h[p]) for kind, h in api["latency_hist"].items() for p in ("p50", "p90", "p99")
    }
    servers = list(csv.DictReader(io.StringIO(download(page, "served-card", "csv"))))
    assert [(r["server"], r["clients"]) for r in servers] == [
        (s["server"], " ".join(map(str, s["clients"]))) for s in api["served_by_clients"]
    ]

    by_client = page.evaluate("document.getElementById('timeline-chart').layout.yaxis.categoryarray")
    page.select_option("select[name=order]", "end")
    by_end = page.evaluate("document.getElementById('timeline-chart').layout.yaxis.categoryarray")
    ends = {f"client {c['client']}": c["end_s"] for c in api["timeline"]}
    assert by_end == sorted(by_client, key=lambda label: (ends[label], label))
    assert "order=end" in page.url
    page.reload()
    page.wait_for_selector("#timeline-chart .main-svg")
    assert page.input_value("select[name=order]") == "end"
    assert page.evaluate("document.getElementById('timeline-chart').layout.yaxis.categoryarray") == by_end
    assert statuses == []  # an ended run is never polled
    watch.assert_clean()


def _typed(value: str) -> Any:
    """A CSV cell as the JSON download has it."""
    try:
        return json.loads(value)
    except ValueError:
        return value
