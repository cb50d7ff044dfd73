"""The matrix's thresholds: per metric, the good and bad boundaries that colour everyone's
matrix. Those an operator saved, else the shipped defaults; boundaries in a page's query
override both for that view only. Which way is better is the metric's (higher_is_better),
not the operator's to choose."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypedDict

from webapp.campaigns.metrics import METRICS
from webapp.dashboards.models import MatrixThreshold
from webapp.dashboards.selectors.parameter_sets import higher_is_better

# Defaults: each run metric's (good, bad) in its unit (RunMetric.thresholds), so that a
# matrix is coloured before anyone saves any. Operators replace them with their own.
Source = Literal["address", "saved", "default"]
SAVE_REFUSAL = "only operators and admins save the matrix's thresholds"


@dataclass(frozen=True)
class Thresholds:
    """good/bad boundaries of a metric: for higher-is-better metrics a value at or above
    `good` is good and at or below `bad` is bad; the other way round otherwise. `source`
    says where they come from: the page's address, an operator's save, or the defaults."""

    good: float
    bad: float
    higher_is_better: bool
    source: Source = "address"
    saved_by: str | None = None
    saved_at: datetime | None = None

    def rate(self, value: float | None) -> str | None:
        if value is None:
            return None
        if self.higher_is_better:
            return "good" if value >= self.good else "bad" if value <= self.bad else "warn"
        return "good" if value <= self.good else "bad" if value >= self.bad else "warn"

    def as_json(self) -> ThresholdsJSON:
        return {
            "good": self.good,
            "bad": self.bad,
            "source": self.source,
            "saved_by": self.saved_by,
            "saved_at": self.saved_at,
        }


def order_error(*, metric: str, good: float, bad: float) -> str | None:
    """Why bad is on the wrong side of good for this metric, or None."""
    if higher_is_better(metric) and bad > good:
        return f"{metric}: higher is better, so bad must be at most good"
    if not higher_is_better(metric) and bad < good:
        return f"{metric}: lower is better, so bad must be at least good"
    return None


def threshold_errors(*, metric: str, good: float, bad: float) -> dict[str, list[str]]:
    """{field: [message]} of boundaries that may not be saved for `metric`; {} if none."""
    if metric not in METRICS:
        return {"metric": [f"unknown metric {metric!r}: one of {', '.join(METRICS)}"]}
    errors: dict[str, list[str]] = {}
    for name, value in (("good", good), ("bad", bad)):
        if not math.isfinite(value):
            errors[name] = ["must be a finite number"]
        elif value < 0:
            errors[name] = [f"must be at least 0 ({METRICS[metric].unit})"]
    order = None if errors else order_error(metric=metric, good=good, bad=bad)
    if order:
        errors["bad"] = [order]
    return errors


def _from_row(metric: str, row: MatrixThreshold | None) -> Thresholds:
    if row is None:
        good, bad = METRICS[metric].thresholds
        return Thresholds(good, bad, higher_is_better(metric), source="default")
    user = row.saved_by.get_username() if row.saved_by else None
    return Thresholds(
        row.good, row.bad, higher_is_better(metric), "saved", saved_by=user, saved_at=row.saved_at
    )


def thresholds_for(metric: str) -> Thresholds:
    """The metric's saved thresholds, else its defaults (one query)."""
    row = MatrixThreshold.objects.select_related("saved_by").filter(metric=metric).first()
    return _from_row(metric, row)


def thresholds_all() -> dict[str, Thresholds]:
    """Every metric's thresholds, saved or default, in RUN_METRICS order (one query)."""
    rows = {r.metric: r for r in MatrixThreshold.objects.select_related("saved_by")}
    return {metric: _from_row(metric, rows.get(metric)) for metric in METRICS}


def thresholds_in_effect(*, metric: str, good: float | None, bad: float | None) -> Thresholds:
    """The query's boundaries when it gives both (no query), else the metric's own."""
    if good is not None and bad is not None:
        return Thresholds(good, bad, higher_is_better(metric))
    return thresholds_for(metric)


def threshold_json(metric: str, thresholds: Thresholds) -> MetricThresholdsJSON:
    return {
        "metric": metric,
        "unit": METRICS[metric].unit,
        "higher_is_better": thresholds.higher_is_better,
        **thresholds.as_json(),
    }


class ThresholdsJSON(TypedDict):
    """A metric's thresholds in effect, as the matrix and the thresholds API answer them."""

    good: float
    bad: float
    source: Source
    saved_by: str | None
    saved_at: datetime | None


class MetricThresholdsJSON(ThresholdsJSON):
    metric: str
    unit: str
    higher_is_better: bool
