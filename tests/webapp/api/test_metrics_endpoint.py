"""GET /metrics: who may read it, and what it says about a small federation's state (the
real Prometheus reads it in test_metrics_prometheus.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from tests.webapp.api.metrics_data import PARAMS, federation_state
from tests.webapp.factories import EndpointFactory, RunFactory, VantagePointFactory
from tests.webapp.watch.nights import run, series
from webapp.archivers.models import ArchiveDelivery, Archiver
from webapp.watch.evaluate import watch_evaluate

TOKEN = "s3cret-scrape-token-0123456789abcdef"

pytestmark = pytest.mark.django_db


def samples(client: Any, **headers: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The exposition parsed: {family: {sorted labels: value}}."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}", **headers})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/openmetrics-text")
    families = text_string_to_metric_families(response.content.decode())
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in families:
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


def test_metrics_is_off_until_a_token_or_an_allow_list_is_set(client: Any, settings: Any) -> None:
    settings.FEDPROBE_METRICS_TOKEN, settings.FEDPROBE_METRICS_ALLOW = "", []
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 404
    assert b"FEDPROBE_METRICS_TOKEN" in response.content
    assert b"FEDPROBE_METRICS_ALLOW" in response.content


def test_metrics_needs_the_scrape_token_and_never_echoes_a_guess(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN, settings.FEDPROBE_METRICS_ALLOW = TOKEN, []
    for sent in ("", "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
        response = client.get("/metrics", headers={"Authorization": sent} if sent else {})
        assert response.status_code == 403, sent
        assert b"wrong" not in response.content and TOKEN.encode() not in response.content
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_allow_list_admits_its_networks_and_a_forged_forwarded_for_changes_nothing(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN = ""
    settings.FEDPROBE_METRICS_ALLOW = ["10.0.0.0/8"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403
    forged = {"X-Forwarded-For": "10.1.2.3"}
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7", headers=forged).status_code == 403


def test_behind_a_proxy_the_allow_list_reads_the_address_the_proxy_saw(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN = ""
    settings.FEDPROBE_METRICS_ALLOW = ["10.0.0.0/8"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxied = {"REMOTE_ADDR": "172.18.0.5"}
    through = {"X-Forwarded-For": "10.9.9.9, 192.0.2.7"}  # the client forged the first
    assert client.get("/metrics", headers=through, **proxied).status_code == 403
    ok = {"X-Forwarded-For": "192.0.2.7, 10.9.9.9"}
    assert client.get("/metrics", headers=ok, **proxied).status_code == 200


def test_metrics_reports_each_series_latest_night_and_the_watch_state(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN = TOKEN
    federation_state()
    VantagePointFactory(name="idle")  # no worker has ever taken its queue
    found = samples(client)
    alpha_local = labels(
        site="ALPHA", endpoint="alpha-root", protocol="root", vantage_point="local", params=PARAMS
    )
    beta_ral = labels(
        site="BETA", endpoint="beta-https", protocol="https", vantage_point="ral", params=PARAMS
    )
    assert found["fedprobe_series_throughput_mbps"][alpha_local] == 100.0
    assert found["fedprobe_series_open_s"][alpha_local] == pytest.approx(0.2)
    assert len(found["fedprobe_series_throughput_mbps"]) == 4
    assert found["fedprobe_series_availability_ratio"][alpha_local] == 1.0
    assert found["fedprobe_series_availability_ratio"][beta_ral] == 0.0
    assert found["fedprobe_series_failing"][alpha_local] == 0.0
    assert found["fedprobe_series_failing"][beta_ral] == 1.0
    assert found["fedprobe_series_throughput_mbps"][beta_ral] == 400.0  # its last measured night
    open_ = found["fedprobe_regressions_open"]
    assert open_[labels(severity="critical", state="open", **dict(beta_ral))] == 1.0
    assert found["fedprobe_vantage_point_workers_live"][labels(vantage_point="ral")] == 1.0
    assert found["fedprobe_vantage_point_workers_live"][labels(vantage_point="idle")] == 0.0
    assert found["fedprobe_vantage_point_queued_runs"][labels(vantage_point="local")] == 1.0
    assert labels(vantage_point="idle") not in found["fedprobe_vantage_point_heartbeat_age_seconds"]
    assert found["fedprobe_runs_active"][labels(state="queued")] == 1.0
    assert found["fedprobe_notifications_backlog"][labels(status="pending")] == 1.0
    assert found["fedprobe_watch_last_pass_timestamp_seconds"][()] > 0


def test_a_scrape_costs_the_same_queries_whatever_the_number_of_series(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN = TOKEN
    state = federation_state()
    with CaptureQueriesContext(connection) as few:
        before = samples(client)
    for n in range(3):
        more = series(endpoint=EndpointFactory(name=f"gamma-{n}"), vantage_point="local")
        run(more, state.now.date() - timedelta(days=1), throughput_mbps=50.0)
    watch_evaluate(now=state.now)
    with CaptureQueriesContext(connection) as many:
        after = samples(client)
    assert len(after["fedprobe_series_throughput_mbps"]) == (
        len(before["fedprobe_series_throughput_mbps"]) + 3
    )
    assert len(many) == len(few) <= 11


def test_runs_pinned_to_each_family_are_two_series_with_labels_of_their_own(
    client: Any, settings: Any
) -> None:
    """A campaign's each: the watch rolls up the IPv4 and the IPv6 runs as two series, and
    /metrics exports them under two label sets (a read's over any family keeps its name)."""
    settings.FEDPROBE_METRICS_TOKEN = TOKEN
    state = federation_state()
    dual = series(endpoint=EndpointFactory(name="dual-root"), vantage_point="local")
    night = state.now.date() - timedelta(days=1)
    run(dual, night, throughput_mbps=80.0, address_family="4")
    run(dual, night, throughput_mbps=20.0, address_family="6")
    watch_evaluate(now=state.now)
    throughput = samples(client)["fedprobe_series_throughput_mbps"]
    by_params = {
        dict(k)["params"]: v for k, v in throughput.items() if ("endpoint", "dual-root") in k
    }
    assert by_params == {"direct@4:random:65536:0.1:2": 80.0, "direct@6:random:65536:0.1:2": 20.0}
    assert {dict(k)["params"] for k in throughput if ("endpoint", "alpha-root") in k} == {PARAMS}


def test_a_hostile_site_name_is_one_label_value_and_the_exposition_still_parses(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN = TOKEN
    state = federation_state()
    site = state.series[0].endpoint.site
    site.name = 'ALPHA "x" \\ {y="z"}\n# EOF'
    site.save()
    found = samples(client)
    sites = {dict(key)["site"] for key in found["fedprobe_series_throughput_mbps"]}
    assert sites == {site.name, "BETA"}


def test_the_exported_run_metrics_are_a_setting_that_names_registry_metrics(
    client: Any, settings: Any
) -> None:
    settings.FEDPROBE_METRICS_TOKEN = TOKEN
    federation_state()
    settings.FEDPROBE_METRICS_SERIES_METRICS = ["all"]
    assert "fedprobe_series_bytes_wire" not in samples(client)  # none measured: no sample
    assert samples(client)["fedprobe_series_wall_s"]
    settings.FEDPROBE_METRICS_SERIES_METRICS = ["throughput_mbps"]
    found = samples(client)
    assert "fedprobe_series_open_s" not in found and found["fedprobe_series_throughput_mbps"]
    settings.FEDPROBE_METRICS_SERIES_METRICS = ["throughput"]
    with pytest.raises(ImproperlyConfigured, match=r"FEDPROBE_METRICS_SERIES_METRICS.*throughput"):
        client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})


def test_each_archivers_backlog_is_fedprobes_own_health(client: Any, settings: Any) -> None:
    settings.FEDPROBE_METRICS_TOKEN = TOKEN
    now = timezone.now()
    behind = Archiver.objects.create(name="behind", kind="http", url="http://x", archive_from=now)
    Archiver.objects.create(name="quiet", kind="http", url="http://y", archive_from=now)
    status = ArchiveDelivery.Status
    waited = {status.PENDING: 600, status.SENDING: 60, status.DELIVERED: 7200, status.FAILED: 9000}
    for state, age_s in waited.items():
        at = now - timedelta(seconds=age_s)
        ArchiveDelivery.objects.create(
            archiver=behind, run=RunFactory(), status=state, created_at=at, next_attempt_at=at
        )
    found = samples(client)
    backlog, failed = found["fedprobe_archiver_backlog"], found["fedprobe_archiver_failed"]
    assert backlog == {labels(archiver="behind"): 2.0, labels(archiver="quiet"): 0.0}
    assert failed == {labels(archiver="behind"): 1.0, labels(archiver="quiet"): 0.0}
    age = found["fedprobe_archiver_oldest_pending_age_seconds"]
    assert 600 <= age[labels(archiver="behind")] < 700  # the pending one, not the delivered
    assert age[labels(archiver="quiet")] == 0.0
