"""The run metrics, defined once: each is a Run column (an aggregate of the run JSON) that a
series, the matrix, compare, the alerts and the watch read, with its label, unit, which way is
better, how a night or a bucket sums it up, how it is written, where the run JSON has it and
the matrix's default thresholds. Selectors, forms, serializers and templates read this
registry rather than listing the metrics again; scripts get a metric's label and unit in
their page's data (docs/run-parameters.md, "How to add a run metric")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

from webapp.core.units import format_duration_s, format_latency_us, format_size

# How a value is written: a rate in MB/s, a time in s, a latency in µs, bytes (binary units),
# CPU time in s.
Kind = Literal["rate", "time", "latency", "bytes", "cpu"]
# How a night, a bucket or a cell sums up a metric's runs (what percentile_cont reads).
Aggregate = Literal["median"]


@dataclass(frozen=True)
class RunMetric:
    """One run metric: a Run column, what it is called and how it reads."""

    name: str  # the Run column and the run JSON's name: "throughput_mbps", "open_s", ...
    label: str  # "Throughput"
    unit: str  # as the API publishes it: "MB/s", "s", "us", "B"
    higher_is_better: bool
    kind: Kind
    # The matrix's (good, bad) boundaries before an operator saves any, in `unit`.
    thresholds: tuple[float, float]
    # A speed the alerts page checks for slowdowns (CPU and bytes moved are costs, not speeds).
    speed: bool = True
    # Checked for slowdowns when the alerts page is given no metric.
    alert_default: bool = False
    aggregate: Aggregate = "median"
    # Where the run JSON (docs/engine.md) has it, when not at the top under `name`.
    json_path: tuple[str, ...] = ()

    def from_run_json(self, run_json: Mapping[str, Any]) -> float | None:
        """The metric's value in a run JSON (None when absent: nothing measured)."""
        value: Any = run_json
        for key in self.json_path or (self.name,):
            value = value.get(key) if isinstance(value, Mapping) else None
        return cast(float | None, value)

    @property
    def display_unit(self) -> str:
        """The unit as pages write it: "µs" where the API's ASCII name says "us"."""
        return "µs" if self.unit == "us" else self.unit

    @property
    def title(self) -> str:
        """What pages call the metric, with its unit: "Read latency p50 (µs)". Forms,
        tables and headings write this, never the column name (latency_p50_us). A label
        that ends in a parenthesis takes the unit inside it: "Open time (p50 over clients, s)"."""
        if self.label.endswith(")"):
            return f"{self.label[:-1]}, {self.display_unit})"
        return f"{self.label} ({self.display_unit})"

    def format(self, value: float) -> str:
        """The value as the tables write it: sizes binary, times and latencies with their
        unit (ms from 1 ms); a rate bare to 0.1 (its unit is in the column or the title)."""
        if self.kind == "bytes":
            return format_size(value)
        if self.kind == "latency":
            return format_latency_us(value)
        if self.kind in ("time", "cpu"):
            return format_duration_s(value)
        return f"{value:,.1f}"


# In the order pages and the API list them (the published OpenAPI enums follow it).
# Thresholds: WLCG-scale figures for one run of a nightly probe (a site that serves under
# 10 MB/s or opens a file in over 2 s is worth a look); operators replace them with their own.
RUN_METRICS: tuple[RunMetric, ...] = (
    RunMetric(
        "throughput_mbps", "Throughput", "MB/s", True, "rate", (100.0, 10.0), alert_default=True
    ),
    RunMetric("wall_s", "Wall time", "s", False, "time", (10.0, 60.0)),
    RunMetric(
        "open_s",
        "Open time (p50 over clients)",
        "s",
        False,
        "time",
        (0.5, 2.0),
        alert_default=True,
    ),
    RunMetric("ttfb_s", "Time to first byte (p50 over clients)", "s", False, "time", (0.5, 2.0)),
    RunMetric(
        "latency_p50_us",
        "Read latency p50",
        "us",
        False,
        "latency",
        (10_000.0, 100_000.0),
        alert_default=True,
        json_path=("op_latency_us", "p50"),
    ),
    RunMetric(
        "latency_p90_us",
        "Read latency p90",
        "us",
        False,
        "latency",
        (20_000.0, 200_000.0),
        json_path=("op_latency_us", "p90"),
    ),
    RunMetric(
        "latency_p99_us",
        "Read latency p99",
        "us",
        False,
        "latency",
        (50_000.0, 500_000.0),
        json_path=("op_latency_us", "p99"),
    ),
    RunMetric("cpu_s", "Client CPU", "s", False, "cpu", (1.0, 10.0), speed=False),
    RunMetric("bytes_wire", "Bytes over the wire", "B", False, "bytes", (1e9, 1e10), speed=False),
)
METRICS: Mapping[str, RunMetric] = MappingProxyType({m.name: m for m in RUN_METRICS})


def metric(name: str) -> RunMetric:
    """The run metric called `name`; KeyError naming it (and the known ones) if unknown."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}: one of {', '.join(METRICS)}") from None
