"""The run JSON a RunResult builds has the shape its TypedDicts declare (workers/engine/results)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.contract import RUN_KEYS
from workers.engine.errors import ErrorClass, InvalidParams
from workers.engine.metrics import ClientError, ClientResult
from workers.engine.params import RunParams
from workers.engine.results import (
    ClientErrorJson,
    ClientRecordJson,
    LatencyHistJson,
    LatencySummaryJson,
    PhaseJson,
    RunErrorJson,
    RunJson,
    RunResult,
    check_run_json,
)


def _result() -> RunResult:
    done = ClientResult(client=0, served_by=["a:1094"], open_s=0.01, ttfb_s=0.02, wall_s=1.0)
    done.add_phase("read", 0.0, 1.0)
    done.histogram("read").record_all([1000, 2000, 3000])
    done.bytes_read = done.bytes_requested = done.bytes_wire = 12_288
    failed = ClientResult(client=1, error=ClientError(ErrorClass.TIMEOUT, "too slow", 2.0))
    return RunResult(
        params=RunParams(urls=("root://a:1094//f",)),
        started_at="2026-11-26T00:00:00+00:00",
        host="worker",
        deadline_s=30.0,
        clients=[done, failed],
        run_error=(ErrorClass.REFUSED, "connection refused"),
        wall_s=1.0,
    )


def _keys(typed: Any) -> set[str]:
    return set(typed.__required_keys__) | set(typed.__optional_keys__)


def test_run_json_has_the_keys_its_typeddicts_declare_at_every_level() -> None:
    run = _result().to_json()
    client = run["clients"][0]
    error = run["clients"][1]["error"]
    assert error is not None
    assert set(run) == _keys(RunJson)
    assert set(run["op_latency_us"]) == _keys(LatencySummaryJson)
    assert set(client) == _keys(ClientRecordJson)
    assert set(client["latency_hist"]["read"]) == _keys(LatencyHistJson)
    assert set(client["phases"][0]) == _keys(PhaseJson)
    assert set(error) == _keys(ClientErrorJson)
    # "phase" only on a credential problem found before any request (below).
    assert [set(e) for e in run["errors"]] == [set(RunErrorJson.__required_keys__)] * 2
    assert json.loads(json.dumps(run)) == run  # plain JSON: what the CLI prints


def test_a_credential_error_before_any_request_says_its_phase() -> None:
    result = _result()
    result.run_error_phase = "credential"
    first = result.to_json()["errors"][0]
    assert set(first) == _keys(RunErrorJson)
    assert (first["class"], first["client"], first["phase"]) == ("refused", None, "credential")


def test_run_json_typeddict_holds_the_documented_contract() -> None:
    assert _keys(RunJson) >= RUN_KEYS


def test_a_run_json_of_the_run_json_shape_passes_the_check_and_nothing_else_does() -> None:
    """What a remote vantage point hands in is checked against the TypedDicts before it is
    stored (check_run_json): each refusal names the path that is wrong."""
    run = json.loads(json.dumps(_result().to_json()))
    assert check_run_json(run) == run
    cases: list[tuple[str, Any, str]] = [
        ("status", "running", "status"),
        ("bytes_read", "12 kB", "run.bytes_read"),
        ("wall_s", True, "run.wall_s"),
        ("served_by", "a:1094", "run.served_by"),
        ("extra", {"huge": "x" * 100}, "run.extra"),
    ]
    for key, value, path in cases:
        with pytest.raises(InvalidParams) as refused:
            check_run_json({**run, key: value})
        assert refused.value.field == path
    broken = json.loads(json.dumps(run))
    broken["clients"][1]["error"]["wasted_s"] = "long"
    with pytest.raises(InvalidParams) as refused:
        check_run_json(broken)
    assert refused.value.field == "run.clients[1].error"
    missing = {k: v for k, v in run.items() if k != "errors"}
    with pytest.raises(InvalidParams, match="is missing"):
        check_run_json(missing)


def test_a_report_without_a_client_version_passes_the_check_and_a_wrong_one_does_not() -> None:
    """An agent older than `client_version` still reports; one that sends it sends text."""
    run = json.loads(json.dumps(_result().to_json()))
    older = {k: v for k, v in run.items() if k != "client_version"}
    assert check_run_json(older) == older
    with pytest.raises(InvalidParams) as refused:
        check_run_json({**run, "client_version": 562})
    assert refused.value.field == "run.client_version"
