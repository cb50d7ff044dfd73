"""The run-metric registry (webapp/campaigns/metrics.py) against the Run model: every Run
figure column is a metric or said here not to be one, every metric is a Run column, and the
synthetic history makes a figure of each."""

from __future__ import annotations

import random
from typing import Any, get_type_hints

import pytest
from django.db import models

from webapp.campaigns.metrics import METRICS, RUN_METRICS, metric
from webapp.campaigns.models import Run
from webapp.demo.synthetic import FIGURES, Conditions, run_figures
from workers.engine.results import RunJson

# Run's number columns that are not run metrics, and why: a new figure column must be added
# to the registry or here (docs/run-parameters.md, "How to add a run metric").
NOT_METRICS = {
    "fraction": "a run parameter (the share of the file read)",
    "deadline_s": "a run parameter (the run's limit)",
    "rate": "a run parameter (a metadata storm's target rate per client)",
    "latency_max_us": "one outlier read: shown on the run page, never compared over runs",
    "ops": "a count of reads, which the parameters fix",
    "bytes_requested": "what the parameters asked for, not how the endpoint did",
    "bytes_read": "what the parameters asked for, not how the endpoint did",
}


def _figure_columns() -> set[str]:
    """Run's float and big-integer columns (where figures of a run are kept; the positive
    ones are its parameters, as read_size)."""
    kinds = (models.FloatField, models.BigIntegerField)
    not_figures = (models.PositiveBigIntegerField, models.BigAutoField)
    return {
        f.name
        for f in Run._meta.concrete_fields
        if isinstance(f, kinds) and not isinstance(f, not_figures)
    }


def test_every_run_figure_column_is_a_metric_or_said_not_to_be() -> None:
    unaccounted = _figure_columns() - set(METRICS) - set(NOT_METRICS)
    assert not unaccounted, f"add to RUN_METRICS (or NOT_METRICS with why): {unaccounted}"


def test_every_metric_is_a_run_column_holding_numbers() -> None:
    columns = {f.name: f for f in Run._meta.concrete_fields}
    for m in RUN_METRICS:
        assert m.name in columns, f"{m.name} is in RUN_METRICS but Run has no such column"
        assert isinstance(columns[m.name], (models.FloatField, models.BigIntegerField))
        assert m.name not in NOT_METRICS


def test_metrics_are_named_once_and_keyed_by_name() -> None:
    assert len({m.name for m in RUN_METRICS}) == len(RUN_METRICS)
    assert list(METRICS) == [m.name for m in RUN_METRICS]


def test_unknown_metric_is_refused_naming_it() -> None:
    with pytest.raises(KeyError, match="'speed_of_light'"):
        metric("speed_of_light")
    assert metric("ttfb_s").higher_is_better is False
    assert metric("throughput_mbps").higher_is_better is True


@pytest.mark.parametrize(
    ("name", "value", "written"),
    [
        ("bytes_wire", 4 * 1024 * 1024, "4 MiB"),
        ("latency_p50_us", 1234, "1.23 ms"),
        ("open_s", 3.254, "3.25 s"),
        ("cpu_s", 0.0023, "2.30 ms"),
        ("throughput_mbps", 968.44, "968.4"),
    ],
)
def test_metrics_are_written_by_their_kind(name: str, value: float, written: str) -> None:
    assert metric(name).format(value) == written


@pytest.mark.parametrize("method", ["direct", "copy"])
def test_the_synthetic_history_makes_a_figure_of_every_metric(method: str) -> None:
    conditions = Conditions(
        rtt_s=0.01, rate_mbps=500, server_s=0.002, open_s=0.03, protocol="root", redirector=False
    )
    figures = run_figures(random.Random(1), (method, "sequential", 1 << 20, 0.1, 4), conditions)
    assert set(figures) == set(FIGURES)
    for m in RUN_METRICS:
        assert isinstance(figures[m.name], (int, float)) and figures[m.name] > 0, m.name


def test_every_metric_is_where_the_engines_run_json_has_it() -> None:
    for m in RUN_METRICS:
        shape: Any = RunJson
        for key in m.json_path or (m.name,):
            hints = get_type_hints(shape)
            assert key in hints, f"{m.name}: the run JSON has no {key!r} (docs/engine.md)"
            shape = hints[key]


def test_a_metric_is_read_from_its_place_in_the_run_json_and_none_when_absent() -> None:
    run_json = {"wall_s": 2.5, "op_latency_us": {"p50": 120.0, "p90": 300.0}}
    assert metric("wall_s").from_run_json(run_json) == 2.5
    assert metric("latency_p90_us").from_run_json(run_json) == 300.0
    assert metric("latency_p99_us").from_run_json(run_json) is None
    assert metric("cpu_s").from_run_json({"op_latency_us": None}) is None
    assert metric("latency_p50_us").from_run_json({"op_latency_us": None}) is None
