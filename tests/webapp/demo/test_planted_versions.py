"""The synthetic history's version changes: every second planted version change is the
client library's, not the server's, and each run names its client as the engine would."""

from __future__ import annotations

from datetime import date, timedelta
from types import SimpleNamespace
from typing import Any

from webapp.demo.planted import Plan, _index, _scenario

START = date(2026, 11, 20)
VERSION_CHANGE = ("version-change", 0.75, 0)


def _model(pk: int, protocol: str) -> Any:
    endpoint = SimpleNamespace(pk=pk, name=f"endpoint-{pk}", protocol=protocol)
    return SimpleNamespace(endpoint=endpoint, site=SimpleNamespace(site=SimpleNamespace(name="s")))


def test_every_second_version_change_is_the_clients_and_runs_name_their_client() -> None:
    models = [_model(1, "root"), _model(2, "root")]
    plan = Plan(versions={1: "5.6.3", 2: "9.2.4"})
    for model in models:
        plan.changes.append(_scenario(plan, model, VERSION_CHANGE, START))
    server, client = plan.changes
    assert (server.server_version, server.client_version) == (("5.6.3", "5.6.4"), None)
    assert (client.server_version, client.client_version) == (None, ("5.6.1", "5.6.2"))
    assert client.to_json()["client_version"] == ("5.6.1", "5.6.2")
    _index(plan, models, [])
    before = START - timedelta(days=1)
    assert plan.client_version(2, "root", "direct", before) == "xrootd 5.6.1 (Python bindings)"
    assert plan.client_version(2, "root", "direct", START) == "xrootd 5.6.2 (Python bindings)"
    assert plan.client_version(2, "root", "copy", START) == "xrdcp v5.6.2"
    assert plan.server_version(2, START) == "9.2.4"  # the server stayed as it was
    assert plan.client_version(1, "root", "stage", START) == "xrdcp v5.6.1"
    assert plan.client_version(1, "https", "direct", START) == "httpx 0.28.1 (httpcore 1.0.9)"
