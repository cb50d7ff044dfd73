"""A real Prometheus (Debian's) scrapes a running fedprobe's /metrics every second with the
scrape token and answers queries about it: a lab endpoint measured for real, and every
PromQL expression of the Grafana dashboards (deploy/grafana) against a federation's state."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.grafana import dashboards, promql_expressions
from tests.prometheus import PrometheusServer
from tests.webapp.api.metrics_data import federation_state
from tests.webapp.factories import IN_PROCESS, CampaignFactory, vantage_point_in_process
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch, run_execute
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.rollups import SETTLE_S

TOKEN = "prometheus-scrape-token-0123456789abcdef"


@pytest.fixture(scope="module")
def prometheus(live_server: Any) -> Iterator[PrometheusServer]:
    """Prometheus scraping the live server, started once for the module."""
    with override_settings(FEDPROBE_METRICS_TOKEN=TOKEN, FEDPROBE_METRICS_ALLOW=[]):
        target = live_server.url.removeprefix("http://")
        server = PrometheusServer(target=target, token=TOKEN).start()
        try:
            yield server
        finally:
            server.stop()


@pytest.mark.lab
def test_prometheus_scrapes_a_lab_endpoints_measured_series(
    lab: Any, prometheus: PrometheusServer
) -> None:
    lab_register(lab=lab)
    campaign = CampaignFactory(
        endpoints=[Endpoint.objects.get(name="local-root")],
        vantage_points=[vantage_point_in_process()], methods=["direct"], patterns=["random"],
        read_sizes=[65536], fractions=[0.1], clients=[1],
    )  # fmt: skip
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    run_execute(run_id=run.pk, worker="test@host")
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.errors
    # The watch's pass after the run's end settled (a pass leaves the latest SETTLE_S alone).
    watch_evaluate(now=timezone.now() + timedelta(seconds=SETTLE_S + 1))

    labels = f'endpoint="local-root",vantage_point="{IN_PROCESS}"'
    series = f"fedprobe_series_throughput_mbps{{{labels}}}"
    found = prometheus.result(series)
    assert found, f"no sample of {series}; scrapes: {prometheus.scrape_errors()}"
    (sample,) = found
    assert sample["metric"]["site"] == Endpoint.objects.get(name="local-root").site.name
    assert sample["metric"]["params"] == "direct:random:65536:0.1:1"
    assert float(sample["value"][1]) == pytest.approx(run.throughput_mbps)
    (up,) = prometheus.result('up{job="fedprobe"}')
    assert up["value"][1] == "1"


def test_every_dashboard_expression_parses_and_has_data(prometheus: PrometheusServer) -> None:
    federation_state()
    expressions = promql_expressions(dashboards())
    assert len(expressions) >= 10
    # The state's first scrape, and one after it: every family of the state scraped whole.
    assert prometheus.result('fedprobe_regressions_open{site="BETA"}')
    assert prometheus.result('fedprobe_series_failing{site="BETA"} == 1')
    empty = []
    for where, expression in expressions:
        # Prometheus answers an expression that does not parse with 400: result() fails then.
        if not prometheus.result(expression, timeout_s=3):
            empty.append(f"{where}: {expression}")
    assert not empty, "no data:\n" + "\n".join(empty)
