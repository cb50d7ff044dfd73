"""The Grafana dashboards of deploy/grafana as the tests read them: their panels, and each
panel's queries with the dashboard's template variables replaced by values of the federation
state of tests/webapp/api/metrics_data.py, formatted as Grafana formats a multi-value
variable for that data source (a regex for Prometheus, a quoted list for PostgreSQL)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.webapp.api.metrics_data import PARAMS

GRAFANA = Path(__file__).resolve().parent.parent / "deploy" / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
PROMETHEUS_UID = "fedprobe-prometheus"
POSTGRES_UID = "fedprobe-postgres"
# One value of each template variable that every query has data for in the federation state.
VALUES = {
    "site": "BETA",
    "endpoint": "beta-https",
    "vantage_point": "ral",
    "protocol": "https",
    "params": PARAMS,
}
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")

Dashboards = dict[str, dict[str, Any]]


def dashboards() -> Dashboards:
    """Each dashboard JSON by its file name."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside rows too."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def datasource_uid(panel: dict[str, Any], target: dict[str, Any]) -> str:
    source = target.get("datasource") or panel.get("datasource") or {}
    return str(source.get("uid", ""))


def promql_expressions(found: Dashboards) -> list[tuple[str, str]]:
    """(where, PromQL) of every Prometheus target and query variable, variables replaced."""
    expressions = []
    for name, dashboard in found.items():
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                if datasource_uid(panel, target) == PROMETHEUS_UID:
                    where = f"{name} panel {panel['title']!r} {target['refId']}"
                    expressions.append((where, substitute(target["expr"], _regex)))
        for variable in dashboard.get("templating", {}).get("list", []):
            if variable.get("type") == "query":
                selector = _label_values_selector(variable["query"]["query"])
                where = f"{name} variable {variable['name']}"
                expressions.append((where, substitute(selector, _regex)))
    return expressions


def sql_queries(found: Dashboards) -> list[tuple[str, str]]:
    """(where, SQL) of every PostgreSQL target, variables replaced."""
    queries = []
    for name, dashboard in found.items():
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                if datasource_uid(panel, target) == POSTGRES_UID:
                    where = f"{name} panel {panel['title']!r} {target['refId']}"
                    queries.append((where, substitute(target["rawSql"], _sql_list)))
    return queries


def substitute(text: str, formatted: Any) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in VALUES:
            raise AssertionError(f"unknown template variable ${name} in {text!r}")
        return str(formatted(VALUES[name]))

    return VARIABLE.sub(value, text)


def _regex(value: str) -> str:
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\\\1", value)


def _sql_list(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _label_values_selector(query: str) -> str:
    """label_values(SELECTOR, label) -> SELECTOR (Grafana's, not PromQL)."""
    match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query.strip())
    if match is None:
        raise AssertionError(f"not a label_values(selector, label) query: {query!r}")
    return match.group(1)
