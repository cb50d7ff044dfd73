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

from tests.celery_worker import WorkerProcess
from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
    vantage_point_in_process,
)
from tests.workers.engine.conftest import relay_to  # noqa: F401  (a fixture of the engine tests)
from webapp.campaigns.models import Run
from webapp.campaigns.services import (
    campaign_launch,
    run_claim,
    run_execute,
    run_fail,
    run_ingest,
)
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint
from workers.engine.errors import ErrorClass
from workers.engine.metrics import ClientError, ClientResult

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 6


def measured_run(lab: Any, clients: int = CLIENTS) -> Run:
    """A random-read run through the lab's redirector, measured in this process (on
    vantage_point_in_process: no worker takes it first)."""
    lab_register(lab=lab)
    endpoint = Endpoint.objects.get(name="redirector-root")
    campaign = CampaignFactory(
        name="redirected reads", endpoints=[endpoint], clients=[clients], read_sizes=[16384],
        fractions=[0.5], vantage_points=[vantage_point_in_process()],
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
    page.wait_for_selector("#served-card[data-drawn]")  # drawn after the timeline
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
    page.on(
        "request", lambda request: "/runs/status/" in request.url and statuses.append(request.url)
    )
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
    buckets = [
        (r["kind"], float(r["lower_us"]), int(r["count"]))
        for r in latency
        if r["series"] == "bucket"
    ]
    assert buckets == [
        (kind, b["lower_us"], b["count"])
        for kind, h in api["latency_hist"].items()
        for b in h["buckets"]
    ]
    assert {
        (r["kind"], r["series"], float(r["lower_us"])) for r in latency if r["series"] != "bucket"
    } == {(kind, p, h[p]) for kind, h in api["latency_hist"].items() for p in ("p50", "p90", "p99")}
    servers = list(csv.DictReader(io.StringIO(download(page, "served-card", "csv"))))
    assert [(r["server"], r["clients"]) for r in servers] == [
        (s["server"], " ".join(map(str, s["clients"]))) for s in api["served_by_clients"]
    ]

    by_client = page.evaluate(
        "document.getElementById('timeline-chart').layout.yaxis.categoryarray"
    )
    page.select_option("select[name=order]", "end")
    by_end = page.evaluate("document.getElementById('timeline-chart').layout.yaxis.categoryarray")
    ends = {f"client {c['client']}": c["end_s"] for c in api["timeline"]}
    assert by_end == sorted(by_client, key=lambda label: (ends[label], label))
    assert "order=end" in page.url
    page.reload()
    page.wait_for_selector("#timeline-chart .main-svg")
    assert page.input_value("select[name=order]") == "end"
    assert (
        page.evaluate("document.getElementById('timeline-chart').layout.yaxis.categoryarray")
        == by_end
    )
    page.select_option("select[name=counts]", "log")
    y_axes = page.eval_on_selector_all(
        "#latency-charts [data-kind]", "charts => charts.map(c => c.layout.yaxis.type)"
    )
    assert set(y_axes) == {"log"} and "counts=log" in page.url and "order=end" in page.url
    assert statuses == []  # an ended run is never polled
    watch.assert_clean()


def _typed(value: str) -> Any:
    """A CSV cell as the JSON download has it."""
    try:
        return json.loads(value)
    except ValueError:
        return value


HOSTILE = "<img src=x onerror=alert(1)>"


def engine_record(client: int, server: str, error: ClientError | None) -> dict[str, Any]:
    """A client's record as the engine makes it (ClientResult.to_json)."""
    result = ClientResult(client=client, served_by=[server], ttfb_s=0.02, wall_s=0.5)
    result.add_phase("open", 0.001, 0.015)
    result.add_phase("read", 0.016, 0.45)
    result.histogram("open").record(14_000_000)
    result.histogram("read").record_all(range(100_000, 400_000, 3000))
    result.error = error
    return result.to_json()


def hover_text(page: Any, chart_id: str, trace: int) -> str:
    """What the hover label of the trace's first point says (Plotly throttles hovers: wait
    until the label is that trace's)."""
    page.evaluate(
        "([id, index]) => Plotly.Fx.hover(id, [{curveNumber: index, pointNumber: 0}])",
        [chart_id, trace],
    )
    label = page.wait_for_function(
        """([id, index]) => {
            const chart = document.getElementById(id);
            const shown = chart._hoverdata && chart._hoverdata[0].curveNumber === index;
            return shown && chart.querySelector('.hoverlayer').textContent;
        }""",
        arg=[chart_id, trace],
    )
    return label.json_value()  # type: ignore[no-any-return]


def test_hostile_names_and_error_messages_stay_text(
    live_server: Any, browser_page: Callable[..., Any]
) -> None:
    endpoint = EndpointFactory(name=HOSTILE, site=SiteFactory(name=HOSTILE))
    run = RunFactory(test_file=TestFileFactory(endpoint=endpoint), clients=2)
    run_claim(run_id=run.pk, worker="w")
    error = ClientError(ErrorClass.SERVER_ERROR, f"the server said {HOSTILE}", 0.45)
    records = [
        engine_record(0, f"{HOSTILE}:1094", None),
        engine_record(1, "ok.example:1094", error),
    ]
    run_ingest(run_id=run.pk, run_json={"status": "partial", "clients": records, "errors": []})

    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#served-chart .main-svg")
    assert page.get_by_text(HOSTILE).first.is_visible()
    ticks = page.eval_on_selector_all(
        "#served-chart .ytick text", "ts => ts.map(t => t.textContent)"
    )
    assert f"{HOSTILE}:1094" in ticks
    names = [t["name"] for t in chart_data(page, "#timeline-chart")]
    assert f"the server said {HOSTILE}" in hover_text(page, "timeline-chart", names.index("error"))
    assert f"served by {HOSTILE}:1094" in hover_text(page, "timeline-chart", names.index("open"))
    assert page.locator("img").count() == 0
    assert page.locator("svg image").count() == 0
    watch.assert_clean()


def test_histograms_are_in_ms_with_whole_counts_of_operations(
    live_server: Any, browser_page: Callable[..., Any]
) -> None:
    """One client: its open is a histogram of one operation (14 ms), its reads 100 (100 to
    397 µs: 0.1 to 0.4 ms)."""
    run = RunFactory(clients=1)
    run_claim(run_id=run.pk, worker="w")
    records = [engine_record(0, "ok.example:1094", None)]
    run_ingest(run_id=run.pk, run_json={"status": "succeeded", "clients": records, "errors": []})

    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#latency-charts [data-kind=open] .main-svg")
    page.wait_for_selector("#latency-charts [data-kind=read] .main-svg")
    open_chart = "#latency-charts [data-kind=open]"
    assert page.eval_on_selector(open_chart, "c => c.layout.title.text") == "open: 1 operation"
    counts = page.eval_on_selector_all(
        f"{open_chart} .ytick text", "ts => ts.map(t => t.textContent)"
    )
    assert counts and all(count.isdigit() for count in counts), counts
    read_chart = "#latency-charts [data-kind=read]"
    assert page.eval_on_selector(read_chart, "c => c.layout.xaxis.title.text") == "latency (ms)"
    (read,) = chart_data(page, read_chart)
    assert min(read["x"]) >= 0.09 and max(read["x"]) <= 0.42
    latencies = page.eval_on_selector_all(
        f"{read_chart} .xtick text", "ts => ts.map(t => t.textContent)"
    )
    assert {"0.1", "0.2"} <= set(latencies), latencies
    watch.assert_clean()


# -- a run that has not ended -------------------------------------------------------------------

FILE_4M = "/fedprobe/file-4M"
LIVE_CLIENTS = 2
LIVE_BANDWIDTH_MBPS = 0.5  # per connection: each client reads its 4.2 MB in ~8 s


def test_a_running_run_is_drawn_live_without_a_reload_then_ends_with_its_charts(
    lab: Any,
    relay_to: Any,  # noqa: F811  (the fixture imported above)
    celery_worker: WorkerProcess,
    live_server: Any,
    browser_page: Callable[..., Any],
) -> None:
    _, url = relay_to("local-root", FILE_4M, bandwidth_mbps=LIVE_BANDWIDTH_MBPS)
    (lab_file,) = [f for f in lab.endpoint("local-root").files if f.path == FILE_4M]
    endpoint = EndpointFactory(base_url=url.split("//fedprobe")[0] + "/")
    TestFileFactory(endpoint=endpoint, path=FILE_4M, size=lab_file.size, adler32=lab_file.adler32)
    campaign = CampaignFactory(
        endpoints=[endpoint], vantage_points=[VantagePointFactory(name="local")],
        patterns=["sequential"], read_sizes=[256 * 1024], fractions=[1.0],
        clients=[LIVE_CLIENTS], deadline_s=300,
    )  # fmt: skip
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)

    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    read_so_far = "Number(document.getElementById('timeline-chart').dataset.bytesRead || 0)"
    # Functions, not expressions: Playwright evaluates an expression with eval, which the
    # pages' Content-Security-Policy refuses.
    page.wait_for_function(f"() => {read_so_far} > 0", timeout=60_000)
    first = page.evaluate(read_so_far)
    page.wait_for_function(f"() => window.sameDocument && {read_so_far} > {first}", timeout=30_000)
    live = chart_data(page, "#timeline-chart")
    assert [t["name"] for t in live] == ["read", "still to read"]
    assert sorted(live[0]["y"]) == [f"client {c}" for c in range(LIVE_CLIENTS)]
    assert page.evaluate("document.getElementById('run-status').textContent") == "running"
    bars = page.eval_on_selector_all("#clients progress", "bars => bars.map(b => b.value)")
    assert len(bars) == LIVE_CLIENTS and max(bars) > 0
    assert page.evaluate("window.sameDocument") is True

    # Once the run has ended the page reloads once, with the results and the final charts.
    # The check may run while the new document is still being parsed (no #run-status yet):
    # optional chaining keeps that a "not yet" rather than an error that ends the wait.
    page.wait_for_function(
        "() => document.getElementById('run-status')?.textContent === 'succeeded' && "
        "document.querySelector('#timeline-chart .main-svg') && "
        "document.getElementById('timeline-chart').data?.some(t => t.name === 'read' && t.base)",
        timeout=60_000,
    )
    assert page.evaluate("window.sameDocument") is None
    traces = chart_data(page, "#timeline-chart")
    (read,) = [t for t in traces if t["name"] == "read"]
    assert sorted(read["y"]) == [f"client {c}" for c in range(LIVE_CLIENTS)]
    assert page.locator("#aggregates").is_visible()
    watch.assert_clean()


def latency_says(page: Any, text: str) -> None:
    """Wait until the latency charts' place says `text` (they are drawn after the load)."""
    page.wait_for_function(
        "text => document.querySelector('#latency-charts').textContent.includes(text)",
        arg=text,
        timeout=10_000,
    )


def test_a_queued_run_says_which_queue_it_waits_on(
    live_server: Any, browser_page: Callable[..., Any]
) -> None:
    run = RunFactory(vantage_point=VantagePointFactory(name="far-away"))
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    message = page.locator("#timeline-chart .chart-message")
    assert "Waiting for a worker on queue vantage.far-away" in message.text_content()
    # The latency charts are drawn once the page has loaded, after the timeline.
    latency_says(page, "appear when the run ends")
    watch.assert_clean()


def test_a_run_that_failed_before_its_clients_started_shows_the_error(
    live_server: Any, browser_page: Callable[..., Any]
) -> None:
    run = RunFactory(clients=3)
    run_claim(run_id=run.pk, worker="w")
    run_fail(run_id=run.pk, message=f"read_size: {HOSTILE} is not a size")
    page, watch = browser_page("viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    message = page.locator("#timeline-chart .chart-error")
    assert f"before its clients started. server-error: read_size: {HOSTILE}" in (
        message.text_content()
    )
    latency_says(page, "No latencies")
    assert page.locator("img").count() == 0
    watch.assert_clean()
