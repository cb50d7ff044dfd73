"""The Grafana dashboards and provisioning of deploy/grafana (Grafana itself is in no Debian
release: it runs in the compose stack only). Each dashboard is one Grafana can load, its
queries name data sources the provisioning makes, and each SQL panel's query reads rows as
the read-only role Grafana connects as. Their PromQL runs against a real Prometheus in
tests/webapp/api/test_metrics_prometheus.py."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import yaml
from django.db import connection

from tests.grafana import (
    DASHBOARDS,
    GRAFANA,
    POSTGRES_UID,
    PROMETHEUS_UID,
    dashboards,
    datasource_uid,
    panels,
    sql_queries,
)
from tests.webapp.api.metrics_data import federation_state

COMPOSE = yaml.safe_load((GRAFANA.parent.parent / "docker-compose.yml").read_text())
READER_PASSWORD = "grafana-reader-test-password"


def test_every_dashboard_has_what_grafana_requires() -> None:
    found = dashboards()
    assert set(found) == {
        "site-overview.json", "protocol-comparison.json", "vantage-point-matrix.json",
        "watch.json",
    }  # fmt: skip
    uids = [dashboard["uid"] for dashboard in found.values()]
    assert len(set(uids)) == len(uids)
    for name, dashboard in found.items():
        assert dashboard["title"] and isinstance(dashboard["schemaVersion"], int), name
        assert len(dashboard["uid"]) <= 40, name  # Grafana's limit
        ids = [panel["id"] for panel in panels(dashboard)]
        assert len(set(ids)) == len(ids), name
        for panel in panels(dashboard):
            assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), (name, panel["title"])
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] in (PROMETHEUS_UID, POSTGRES_UID), panel["title"]
            assert panel["targets"], (name, panel["title"])
            refs = [target["refId"] for target in panel["targets"]]
            assert len(set(refs)) == len(refs), (name, panel["title"])
            for target in panel["targets"]:
                key = "expr" if datasource_uid(panel, target) == PROMETHEUS_UID else "rawSql"
                assert target[key].strip(), (name, panel["title"])


def test_provisioning_makes_the_data_sources_and_loads_the_dashboards_compose_mounts() -> None:
    provisioning = GRAFANA / "provisioning"
    sources = yaml.safe_load((provisioning / "datasources" / "fedprobe.yml").read_text())
    by_uid = {source["uid"]: source for source in sources["datasources"]}
    assert set(by_uid) == {PROMETHEUS_UID, POSTGRES_UID}
    assert by_uid[PROMETHEUS_UID]["url"] == "http://prometheus:9090"
    assert by_uid[POSTGRES_UID]["user"] == "grafana_reader"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "fedprobe.yml").read_text())[
        "providers"
    ]
    grafana = COMPOSE["services"]["grafana"]
    mounts = dict(volume.rsplit(":", 1)[0].split(":", 1) for volume in grafana["volumes"][:2])
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    assert grafana["image"].startswith("grafana/grafana-oss:") and ":latest" not in grafana["image"]
    prometheus = COMPOSE["services"]["prometheus"]
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    scrape = yaml.safe_load((GRAFANA.parent / "prometheus.yml").read_text())
    (job,) = scrape["scrape_configs"]
    assert job["static_configs"][0]["targets"] == ["web:8000"]
    assert job["authorization"]["credentials_file"] == "/run/secrets/metrics_token"
    assert {s["source"] for s in prometheus["secrets"]} == {"metrics_token"}
    assert DASHBOARDS.is_dir()


@pytest.fixture
def grafana_reader(transactional_db: None) -> Iterator[str]:
    """deploy/grafana/reader.sql applied to the test database by psql, as the compose
    service grafana-reader applies it; yields the role's connection string. The role is
    dropped after (roles are the server's, not the database's)."""
    params = connection.get_connection_params()
    env = {
        **os.environ,
        "PGHOST": params.get("host", "127.0.0.1"),
        "PGPORT": str(params.get("port", 5432)),
        "PGUSER": params["user"],
        "PGDATABASE": params["dbname"],
        "GRAFANA_DB_PASSWORD": READER_PASSWORD,
    }
    if params.get("password"):
        env["PGPASSWORD"] = params["password"]
    for _ in range(2):  # idempotent: the service runs it after every migrate
        subprocess.run(
            ["psql", "-v", "ON_ERROR_STOP=1", "-q", "-f", str(GRAFANA / "reader.sql")],
            env=env, check=True, capture_output=True, timeout=30,
        )  # fmt: skip
    try:
        yield (
            f"host={env['PGHOST']} port={env['PGPORT']} dbname={env['PGDATABASE']} "
            f"user=grafana_reader password={READER_PASSWORD}"
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP OWNED BY grafana_reader")
            cursor.execute("DROP ROLE grafana_reader")


def test_every_sql_panel_reads_rows_as_the_read_only_reader(grafana_reader: str) -> None:
    federation_state()
    queries = sql_queries(dashboards())
    assert len(queries) >= 3
    with psycopg.connect(grafana_reader, autocommit=True) as reader:
        for where, query in queries:
            rows: list[Any] = reader.execute(query).fetchall()
            assert rows, f"{where}: no rows"
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.execute("UPDATE watch_regression SET summary = ''")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT * FROM campaigns_run LIMIT 1")
        for secret in (  # an endpoint's stored token or proxy, a vantage point's token digests
            "SELECT credential FROM sites_endpoint",
            "SELECT agent_token_digest FROM sites_vantagepoint",
            "SELECT enrolment_token_digest FROM sites_vantagepoint",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(secret)
