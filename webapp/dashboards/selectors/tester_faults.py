"""The tester's own faults (docs/watch.md "Tester faults"): runs that ended by a fault of the
tester (a worker that died, a harness error, the egress policy, an expired credential or an
unreachable issuer), listed by vantage point apart from the endpoints' failures, which they
never count in. Read from what the watch's pass stored of each night (webapp/watch/latest.py),
never from raw runs on a request."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, TypedDict

from django.db.models import Count, Max, Sum
from django.urls import reverse

from webapp.core import sql
from webapp.watch.models import SeriesTesterFault
from workers.engine.errors import CREDENTIAL_PHASE


class TesterFaultRow(TypedDict):
    """The tester faults of one vantage point and first error class (and phase)."""

    vantage_point: str
    error_class: str
    phase: str  # "credential" for a credential problem found before any request, else ""
    what: str  # in words: "the worker stopped reporting (lost)", ...
    runs: int
    endpoints: int
    latest_at: datetime
    run: int  # the latest such run
    run_url: str


# What each class means, as the page says it.
WHAT = {
    "lost": "the worker stopped reporting (lost)",
    "harness": "the worker or its host failed (harness)",
    "egress": "the egress policy refused the address (egress)",
}


def tester_faults(*, since: date, filters: dict[str, Any]) -> list[TesterFaultRow]:
    """Tester faults of the nights since `since` per vantage point, first error class and
    phase, the most recent first, as of the watch's last pass (its SeriesTesterFault rows);
    `filters` as alerts_filters'. One query."""
    rows = (
        SeriesTesterFault.objects.filter(night__gte=since, **filters)
        .values("vantage_point__name", "error_class", "phase")
        .annotate(
            runs=Sum("runs"),
            endpoints=Count("endpoint", distinct=True),
            latest_at=Max("latest_at"),
            run=Max("run"),
        )
        .order_by("-latest_at", "vantage_point__name", "error_class")
    )
    return [_row(row) for row in rows]


def _row(row: Mapping[str, Any]) -> TesterFaultRow:
    error_class, phase = row["error_class"], row["phase"]
    what = (
        f"the credential failed before any request ({error_class})"
        if phase == CREDENTIAL_PHASE
        else WHAT.get(error_class, error_class)
    )
    latest_at = sql.aware_datetime(row["latest_at"])
    assert latest_at is not None  # a group has runs
    return {
        "vantage_point": row["vantage_point__name"],
        "error_class": error_class,
        "phase": phase,
        "what": what,
        "runs": row["runs"],
        "endpoints": row["endpoints"],
        "latest_at": latest_at,
        "run": row["run"],
        "run_url": reverse("campaigns:run-detail", args=[row["run"]]),
    }
